// Where generated tensor bytes go: a safetensors file being written (SafetensorsWriter) or host
// memory (the synthetic checkpoint), so one generator serves both.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace flashdesk {

class TensorSink {
 public:
  virtual ~TensorSink() = default;
  // Writes `bytes` at byte `offset` within tensor `name`'s data. Safe to call from several
  // threads for disjoint ranges.
  virtual void write(std::string_view name, std::span<const uint8_t> bytes,
                     uint64_t offset = 0) = 0;
};

}  // namespace flashdesk
