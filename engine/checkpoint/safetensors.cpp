// Safetensors header validation and the mapped file.
#include "engine/checkpoint/safetensors.h"

#include <algorithm>

#include "engine/checkpoint/json_fields.h"
#include "engine/util/error.h"

namespace flashdesk {
namespace {

using nlohmann::json;

constexpr size_t kMaxRank = 8;

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Multiplies unsigned sizes, failing on overflow past 2^63.
bool checked_mul(uint64_t a, uint64_t b, uint64_t& out) {
  if (a != 0 && b > (uint64_t{INT64_MAX} / a)) return false;
  out = a * b;
  return true;
}

uint64_t offset_value(const json& v, const std::string& file, const std::string& where) {
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
    throw FormatError(file, where + ": expected a non-negative integer");
  return v.get<uint64_t>();
}

SafetensorsEntry parse_entry(const std::string& name, const json& v, uint64_t data_size,
                             const std::string& file) {
  const std::string where = "tensor '" + name + "'";
  if (!v.is_object()) throw FormatError(file, where + ": expected an object");
  const auto dt = v.find("dtype");
  if (dt == v.end() || !dt->is_string())
    throw FormatError(file, where + ": dtype missing or not a string");
  const auto dtype = parse_dtype(dt->get<std::string>());
  if (!dtype)
    throw FormatError(file, where + ": unsupported dtype '" + dt->get<std::string>() + "'");
  const auto sh = v.find("shape");
  if (sh == v.end() || !sh->is_array())
    throw FormatError(file, where + ": shape missing or not an array");
  if (sh->size() > kMaxRank) throw FormatError(file, where + ": shape has more than 8 dimensions");
  SafetensorsEntry e{name, *dtype, {}, 0, 0};
  uint64_t numel = 1;
  for (const json& d : *sh) {
    const uint64_t dim = offset_value(d, file, where + " shape");
    if (!checked_mul(numel, dim, numel)) throw FormatError(file, where + ": shape overflows");
    e.shape.push_back(static_cast<int64_t>(dim));
  }
  const auto off = v.find("data_offsets");
  if (off == v.end() || !off->is_array() || off->size() != 2)
    throw FormatError(file, where + ": data_offsets must be [begin, end]");
  const uint64_t begin = offset_value((*off)[0], file, where + " data_offsets");
  const uint64_t end = offset_value((*off)[1], file, where + " data_offsets");
  if (begin > end || end > data_size)
    throw FormatError(file, where + ": data_offsets [" + std::to_string(begin) + ", " +
                                std::to_string(end) + "] lie outside the data section of " +
                                std::to_string(data_size) + " bytes");
  uint64_t expected = 0;
  if (!checked_mul(numel, dtype_size(*dtype), expected) || end - begin != expected)
    throw FormatError(file, where + ": holds " + std::to_string(end - begin) +
                                " bytes but its dtype and shape need " + std::to_string(expected));
  e.offset = begin;  // relative for now; made absolute by the caller
  e.nbytes = expected;
  return e;
}

std::map<std::string, std::string> parse_metadata(const json& v, const std::string& file) {
  if (!v.is_object()) throw FormatError(file, "__metadata__: expected an object of strings");
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : v.items()) {
    if (!value.is_string()) throw FormatError(file, "__metadata__." + key + ": expected a string");
    out[key] = value.get<std::string>();
  }
  return out;
}

void check_no_overlap(const std::vector<SafetensorsEntry>& sorted, const std::string& file) {
  for (size_t i = 1; i < sorted.size(); ++i) {
    const SafetensorsEntry& a = sorted[i - 1];
    const SafetensorsEntry& b = sorted[i];
    if (b.offset < a.offset + a.nbytes)
      throw FormatError(file, "tensors '" + a.name + "' and '" + b.name + "' overlap");
  }
}

}  // namespace

SafetensorsHeader parse_safetensors_header(std::span<const uint8_t> bytes, uint64_t file_size,
                                           const std::string& file) {
  if (bytes.size() < 8 || file_size < 8)
    throw FormatError(file, "truncated: shorter than the 8-byte header length");
  SafetensorsHeader h;
  h.header_length = read_le64(bytes.data());
  if (h.header_length < 2 || h.header_length > kMaxSafetensorsHeader)
    throw FormatError(file, "header length " + std::to_string(h.header_length) +
                                " is outside [2, " + std::to_string(kMaxSafetensorsHeader) + "]");
  h.data_start = 8 + h.header_length;
  if (h.data_start > file_size || h.data_start > bytes.size())
    throw FormatError(file, "truncated: header of " + std::to_string(h.header_length) +
                                " bytes does not fit in the file of " + std::to_string(file_size) +
                                " bytes");
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8), h.header_length);
  const json doc = parse_json_text(text, file + " (header)", 16);
  if (!doc.is_object()) throw FormatError(file, "header: expected a JSON object");
  const uint64_t data_size = file_size - h.data_start;
  for (const auto& [name, value] : doc.items()) {
    if (name == "__metadata__") {
      h.metadata = parse_metadata(value, file);
      continue;
    }
    h.tensors.push_back(parse_entry(name, value, data_size, file));
  }
  std::sort(h.tensors.begin(), h.tensors.end(), [](const auto& a, const auto& b) {
    return a.offset < b.offset || (a.offset == b.offset && a.nbytes < b.nbytes);
  });
  check_no_overlap(h.tensors, file);
  for (SafetensorsEntry& e : h.tensors) e.offset += h.data_start;
  return h;
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path, uint64_t copy_limit)
    : map_(path, copy_limit) {
  header_ = parse_safetensors_header(map_.bytes(), map_.size(), path.string());
  for (size_t i = 0; i < header_.tensors.size(); ++i) index_.emplace(header_.tensors[i].name, i);
}

const SafetensorsEntry* SafetensorsFile::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &header_.tensors[it->second];
}

}  // namespace flashdesk
