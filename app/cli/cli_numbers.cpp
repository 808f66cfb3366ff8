// Layer numbers from the command line (cli_numbers.h).
#include "app/cli/cli_numbers.h"

#include <stdexcept>

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

}  // namespace flashdesk::cli
