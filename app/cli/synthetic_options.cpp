// Declares and reads --synthetic-weights and --synthetic-layers.
#include "app/cli/synthetic_options.h"

#include <string>

#include "app/cli/cli_numbers.h"
#include "engine/util/error.h"

namespace flashdesk::cli {

void add_synthetic_options(cxxopts::Options& options, bool layers) {
  options.add_options("model")(
      "synthetic-weights",
      "generate the weights in memory as make-random --seed SEED would write them (nothing is "
      "read but the config): --model then names a config.json or a directory holding one",
      cxxopts::value<std::string>(), "SEED");
  if (layers)
    options.add_options("model")(
        "synthetic-layers",
        "with --synthetic-weights: only these main layers (comma list) plus their sources, "
        "embed, norm and head, as make-random --layers",
        cxxopts::value<std::string>(), "LIST");
}

std::optional<SyntheticWeights> synthetic_options(const cxxopts::ParseResult& args) {
  const bool layers = args.count("synthetic-layers") > 0;
  if (!args.count("synthetic-weights")) {
    if (layers) throw InvalidRequest("--synthetic-layers needs --synthetic-weights SEED");
    return std::nullopt;
  }
  const std::string text = args["synthetic-weights"].as<std::string>();
  const std::optional<uint64_t> seed = parse_unsigned_integer(text);
  if (!seed)
    throw InvalidRequest(
        "--synthetic-weights: expected a seed (a whole number 0 to "
        "18446744073709551615), got '" +
        text + "'");
  SyntheticWeights w;
  w.seed = *seed;
  if (layers)
    w.layers = parse_layer_list(args["synthetic-layers"].as<std::string>(), "--synthetic-layers");
  return w;
}

}  // namespace flashdesk::cli
