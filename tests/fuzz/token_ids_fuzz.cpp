// Fuzz target: the token-id list parser must accept or throw FormatError, never crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/util/error.h"
#include "engine/util/token_ids_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    flashdesk::parse_token_ids(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const flashdesk::FormatError&) {
  }
  return 0;
}
