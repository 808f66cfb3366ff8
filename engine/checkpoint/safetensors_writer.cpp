// Layout planning and chunked writing of safetensors files.
#include "engine/checkpoint/safetensors_writer.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "engine/util/error.h"

namespace flashdesk {

SafetensorsWriter::SafetensorsWriter(std::filesystem::path path, std::vector<TensorSpec> tensors,
                                     const std::map<std::string, std::string>& metadata)
    : out_(std::move(path)) {
  std::stable_sort(tensors.begin(), tensors.end(), [](const TensorSpec& a, const TensorSpec& b) {
    return dtype_size(a.dtype) > dtype_size(b.dtype);
  });
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (TensorSpec& spec : tensors) {
    FD_CHECK(!by_name_.contains(spec.name), "tensor listed twice: " + spec.name);
    const uint64_t n = spec.nbytes();
    header[spec.name] = {{"dtype", std::string(dtype_name(spec.dtype))},
                         {"shape", spec.shape},
                         {"data_offsets", {offset, offset + n}}};
    by_name_.emplace(spec.name, slots_.size());
    slots_.push_back({std::move(spec), offset, std::make_unique<std::atomic<uint64_t>>(0)});
    offset += n;
  }
  std::string text = header.dump();
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  const uint64_t data_start = 8 + text.size();
  for (Slot& s : slots_) s.file_offset += data_start;
  file_size_ = data_start + offset;
  out_.resize(file_size_);
  uint8_t prefix[8];
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<uint8_t>(uint64_t{text.size()} >> (8 * i));
  out_.write_at(0, prefix);
  out_.write_at(8, {reinterpret_cast<const uint8_t*>(text.data()), text.size()});
}

void SafetensorsWriter::write(std::string_view name, std::span<const uint8_t> bytes,
                              uint64_t offset) {
  const auto it = by_name_.find(std::string(name));
  FD_CHECK(it != by_name_.end(), "no tensor named " + std::string(name) + " in this file");
  Slot& s = slots_[it->second];
  FD_CHECK(offset + bytes.size() <= s.spec.nbytes(), "write past the end of tensor " + s.spec.name);
  out_.write_at(s.file_offset + offset, bytes);
  *s.written += bytes.size();
}

void SafetensorsWriter::commit() {
  for (const Slot& s : slots_)
    FD_CHECK(*s.written == s.spec.nbytes(), "tensor " + s.spec.name + ": " +
                                                std::to_string(s.written->load()) + " of " +
                                                std::to_string(s.spec.nbytes()) + " bytes written");
  out_.commit();
}

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorData>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<TensorSpec> specs;
  for (const TensorData& t : tensors) specs.push_back({t.name, t.dtype, t.shape});
  SafetensorsWriter writer(path, specs, metadata);
  for (const TensorData& t : tensors) {
    const TensorSpec spec{t.name, t.dtype, t.shape};
    FD_CHECK(t.bytes.size() == spec.nbytes(),
             "tensor " + t.name + ": byte count does not match its dtype and shape");
    writer.write(t.name, t.bytes);
  }
  writer.commit();
}

}  // namespace flashdesk
