// Safetensors files: the header parser (pure, fuzzed) and a memory-mapped file with its tensors.
//
// Layout: 8-byte little-endian header length N, N bytes of JSON, then the data section.
// The JSON maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]} (offsets
// relative to the data section) plus an optional "__metadata__" string map.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/util/dtype.h"
#include "engine/util/mapped_file.h"

namespace flashdesk {

// Header lengths above this are refused (the reference implementation uses the same bound).
constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // from the start of the file (data section start + begin)
  uint64_t nbytes = 0;
};

struct SafetensorsHeader {
  uint64_t header_length = 0;  // N: the JSON bytes after the 8-byte prefix
  uint64_t data_start = 0;     // 8 + N
  std::map<std::string, std::string> metadata;
  std::vector<SafetensorsEntry> tensors;  // in file order (ascending offset)
};

// Parses and validates a header. `bytes` starts at the file's first byte and holds at least the
// header (it may hold the whole file); `file_size` bounds the data offsets; `file` names the
// file in errors. Checks: length prefix present and within bounds, JSON object, known dtypes,
// non-negative shapes, end - begin == numel * dtype size, offsets inside the data section, no two
// tensors overlapping. Any violation is a FormatError naming the file and tensor/field.
SafetensorsHeader parse_safetensors_header(std::span<const uint8_t> bytes, uint64_t file_size,
                                           const std::string& file);

// A safetensors file held read-only (mapped, or copied when at most `copy_limit` bytes:
// mapped_file.h) with its parsed header.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path,
                           uint64_t copy_limit = kDefaultCopyLimit);

  const std::filesystem::path& path() const { return map_.path(); }
  uint64_t size() const { return map_.size(); }
  const SafetensorsHeader& header() const { return header_; }
  const std::vector<SafetensorsEntry>& tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  // The raw header bytes (length prefix + JSON): what the checkpoint fingerprint digests.
  std::span<const uint8_t> header_bytes() const {
    return map_.bytes().first(static_cast<size_t>(header_.data_start));
  }
  // nullptr when absent.
  const SafetensorsEntry* find(std::string_view name) const;
  const uint8_t* data(const SafetensorsEntry& e) const { return map_.data() + e.offset; }
  // The whole file's bytes and how it is held (for the weight digest).
  const MappedFile& file() const { return map_; }

 private:
  MappedFile map_;
  SafetensorsHeader header_;
  std::map<std::string, size_t, std::less<>> index_;
};

}  // namespace flashdesk
