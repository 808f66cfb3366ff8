// libFuzzer target: the safetensors header parser must turn any bytes into a header or a
// FormatError, never a crash, hang or out-of-bounds read.
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/checkpoint/safetensors.h"
#include "engine/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  try {
    const auto header = flashdesk::parse_safetensors_header(bytes, size, "fuzz.safetensors");
    // Every accepted tensor lies inside the input.
    for (const auto& t : header.tensors)
      if (t.offset + t.nbytes > size) __builtin_trap();
  } catch (const flashdesk::FormatError&) {
  }
  return 0;
}
