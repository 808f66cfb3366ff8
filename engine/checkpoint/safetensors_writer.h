// Writes safetensors files: the layout is planned from the tensor list up front, so tensor bytes
// can be streamed in chunks (from several threads) without holding a whole model in memory.
// The file appears under its name only once complete (written to a temporary name, renamed).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/checkpoint/tensor_sink.h"
#include "engine/checkpoint/tensor_spec.h"
#include "engine/util/file_io.h"

namespace flashdesk {

class SafetensorsWriter final : public TensorSink {
 public:
  // Plans the file: header (padded with spaces so the data starts 8-byte aligned), then the
  // tensors ordered by element size (8, 4, 2, 1 bytes; stable within a size), contiguous, so
  // every tensor is aligned to its element size and the data section has no holes.
  SafetensorsWriter(std::filesystem::path path, std::vector<TensorSpec> tensors,
                    const std::map<std::string, std::string>& metadata);

  // Writes `bytes` at `offset` within tensor `name`'s data. Safe to call from several threads
  // for disjoint ranges.
  void write(std::string_view name, std::span<const uint8_t> bytes, uint64_t offset = 0) override;
  // Checks that every tensor byte was written, then syncs and renames the file into place.
  void commit();
  // Renames the file into place with unwritten tensor bytes left as holes (read as zeros; the
  // file stays sparse): loader tests at full size without writing hundreds of GiB.
  void commit_with_holes();

  uint64_t file_size() const { return file_size_; }
  const std::filesystem::path& path() const { return out_.path(); }

 private:
  struct Slot {
    TensorSpec spec;
    uint64_t file_offset = 0;
    std::unique_ptr<std::atomic<uint64_t>> written;
  };
  AtomicFileWriter out_;
  std::vector<Slot> slots_;
  std::unordered_map<std::string, size_t> by_name_;
  uint64_t file_size_ = 0;
};

// A tensor held in memory, for small files (tests, the Engram token map).
struct TensorData {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorData>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace flashdesk
