// Fuzzes session import: any bytes give a SessionExport or a FormatError, never a crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/util/error.h"
#include "storage/session_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    flashdesk::storage::session_from_json(
        std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json");
  } catch (const flashdesk::FormatError&) {
  }
  return 0;
}
