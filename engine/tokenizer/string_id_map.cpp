// Flat string -> id hash map (see string_id_map.h).
#include "engine/tokenizer/string_id_map.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace flashdesk {

uint64_t StringIdMap::hash(std::string_view a, std::string_view b) {
  // FNV-1a, streamed over a then b so that a + b never has to be built.
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : a) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ULL;
  for (char c : b) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ULL;
  return h ^ (h >> 29);
}

bool StringIdMap::equals(const Entry& e, std::string_view a, std::string_view b) const {
  if (e.length != a.size() + b.size()) return false;
  const char* k = arena_.data() + e.offset;
  return std::memcmp(k, a.data(), a.size()) == 0 &&
         std::memcmp(k + a.size(), b.data(), b.size()) == 0;
}

void StringIdMap::reserve(size_t n) {
  entries_.reserve(n);
  if (n * 2 > slots_.size()) rehash(std::bit_ceil(n * 2));
}

void StringIdMap::rehash(size_t slot_count) {
  slots_.assign(slot_count, 0);
  const size_t mask = slot_count - 1;
  for (uint32_t i = 0; i < entries_.size(); ++i) {
    size_t s = entries_[i].hash & mask;
    while (slots_[s]) s = (s + 1) & mask;
    slots_[s] = i + 1;
  }
}

bool StringIdMap::insert(std::string_view key, int32_t value) {
  if ((entries_.size() + 1) * 2 > slots_.size()) rehash(std::max<size_t>(16, slots_.size() * 2));
  const uint64_t h = hash(key, {});
  const size_t mask = slots_.size() - 1;
  size_t s = h & mask;
  for (; slots_[s]; s = (s + 1) & mask) {
    const Entry& e = entries_[slots_[s] - 1];
    if (e.hash == h && equals(e, key, {})) return false;
  }
  entries_.push_back(
      {h, static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(key.size()), value});
  arena_.append(key);
  slots_[s] = static_cast<uint32_t>(entries_.size());
  return true;
}

std::optional<int32_t> StringIdMap::find_concat(std::string_view a, std::string_view b) const {
  if (slots_.empty()) return std::nullopt;
  const uint64_t h = hash(a, b);
  const size_t mask = slots_.size() - 1;
  for (size_t s = h & mask; slots_[s]; s = (s + 1) & mask) {
    const Entry& e = entries_[slots_[s] - 1];
    if (e.hash == h && equals(e, a, b)) return e.value;
  }
  return std::nullopt;
}

void StringIdMap::clear() {
  arena_.clear();
  entries_.clear();
  std::fill(slots_.begin(), slots_.end(), 0);
}

}  // namespace flashdesk
