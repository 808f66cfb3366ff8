// Fuzzes KV block file verification: any bytes are accepted only when valid, else a FormatError.
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/util/error.h"
#include "storage/kv_block_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  try {
    const auto header = flashdesk::storage::parse_block_header(bytes, "fuzz.kvb");
    flashdesk::storage::verify_block_file(bytes, header.key, header.model_fingerprint, "fuzz.kvb");
  } catch (const flashdesk::FormatError&) {
  }
  return 0;
}
