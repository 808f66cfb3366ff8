// Layer numbers and seeds from the command line (cli_numbers.h).
#include "app/cli/cli_numbers.h"

#include <charconv>
#include <sstream>
#include <stdexcept>

#include "engine/util/error.h"

namespace flashdesk::cli {

std::optional<int64_t> parse_nonnegative_integer(const std::string& text) {
  size_t used = 0;
  int64_t v = -1;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used == 0 || used != text.size() || v < 0) return std::nullopt;
  return v;
}

std::optional<uint64_t> parse_unsigned_integer(const std::string& text) {
  uint64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [next, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || next != end) return std::nullopt;
  return v;
}

std::vector<int64_t> parse_layer_list(const std::string& text, const std::string& option) {
  std::vector<int64_t> layers;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const std::optional<int64_t> v = parse_nonnegative_integer(item);
    if (!v) throw InvalidRequest(option + ": '" + item + "' is not a layer number");
    layers.push_back(*v);
  }
  if (layers.empty()) throw InvalidRequest(option + ": empty list");
  return layers;
}

}  // namespace flashdesk::cli
