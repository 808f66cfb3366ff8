// Flat hash map from byte strings to int32 values with every key in one arena: a 128k-token
// vocab loads and is searched without a node allocation or pointer chase per entry.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flashdesk {

class StringIdMap {
 public:
  void reserve(size_t n);
  // Adds key -> value; returns false (changing nothing) when the key is present.
  bool insert(std::string_view key, int32_t value);
  std::optional<int32_t> find(std::string_view key) const { return find_concat(key, {}); }
  // The value of the key a + b, without building it.
  std::optional<int32_t> find_concat(std::string_view a, std::string_view b) const;
  void clear();
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    uint64_t hash;
    uint32_t offset;  // into arena_
    uint32_t length;
    int32_t value;
  };
  static uint64_t hash(std::string_view a, std::string_view b);
  bool equals(const Entry& e, std::string_view a, std::string_view b) const;
  void rehash(size_t slot_count);

  std::string arena_;
  std::vector<Entry> entries_;
  std::vector<uint32_t> slots_;  // entry index + 1; 0 = empty. Size: power of two
};

}  // namespace flashdesk
