// `flashdesk-cli make-random`: writes a random checkpoint for a config (tests, benchmarks).
#include <cstdio>
#include <string>

#include <cxxopts.hpp>

#include "app/cli/cli_numbers.h"
#include "engine/checkpoint/random_checkpoint.h"
#include "engine/util/error.h"

namespace flashdesk::cli {

int run_make_random(int argc, char** argv) {
  cxxopts::Options opts("flashdesk-cli make-random",
                        "Write a random checkpoint directory in the V4.1 format for a config");
  // clang-format off
  opts.add_options()
      ("config", "config.json to use (copied into the directory)", cxxopts::value<std::string>())
      ("out", "output directory (created if missing)", cxxopts::value<std::string>())
      ("seed", "PRNG seed (the same seed writes the same bytes)",
       cxxopts::value<uint64_t>()->default_value("0"))
      ("layers", "only these main layers (comma list) plus their sources, embed, norm and head",
       cxxopts::value<std::string>())
      ("shard-mb", "largest shard in MiB (0: one file up to 4 GiB, else 4 GiB shards)",
       cxxopts::value<uint64_t>()->default_value("0"))
      ("threads", "generator threads (0: all)", cxxopts::value<int>()->default_value("0"))
      ("skeleton", "headers only: tensor bytes are holes in sparse files (loader tests at full size)")
      ("h,help", "show this help");
  // clang-format on
  const auto args = opts.parse(argc, argv);
  if (args.count("help")) {
    std::printf("%s\n", opts.help().c_str());
    return 0;
  }
  if (!args.count("config") || !args.count("out"))
    throw InvalidRequest("make-random needs --config FILE and --out DIR");
  RandomCheckpointOptions options;
  options.seed = args["seed"].as<uint64_t>();
  if (args.count("layers"))
    options.layers = parse_layer_list(args["layers"].as<std::string>(), "--layers");
  options.shard_bytes = args["shard-mb"].as<uint64_t>() << 20;
  options.threads = args["threads"].as<int>();
  options.skeleton = args.count("skeleton") > 0;
  options.progress = [](const std::string& line) { std::printf("%s\n", line.c_str()); };
  const auto summary = write_random_checkpoint(args["config"].as<std::string>(),
                                               args["out"].as<std::string>(), options);
  std::printf("wrote %lld tensors, %llu bytes in %zu files to %s\n",
              static_cast<long long>(summary.tensors),
              static_cast<unsigned long long>(summary.bytes), summary.files.size(),
              args["out"].as<std::string>().c_str());
  if (!summary.layers.empty()) {
    std::string list;
    for (int64_t l : summary.layers) list += (list.empty() ? "" : ",") + std::to_string(l);
    std::printf("partial checkpoint: layers %s (open with allow_partial / --allow-partial)\n",
                list.c_str());
  }
  return 0;
}

}  // namespace flashdesk::cli
