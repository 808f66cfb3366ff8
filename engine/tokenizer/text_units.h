// A text segment decoded once into code units with their class flags, for the pattern matchers.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace flashdesk {

// Unit i spans bytes [offset[i], offset[i+1]) of the segment. A unit is a code point, or an
// ill-formed UTF-8 subpart (cp == utf8::Unit::kInvalid, flags 0): invalid input is still split
// and byte-level encoded, so encode() never rejects text and decode_bytes() gives it back.
struct TextUnits {
  std::vector<uint32_t> cp;
  std::vector<uint8_t> flags;    // unicode::ClassFlag bits of cp
  std::vector<uint32_t> offset;  // size() + 1 entries

  void assign(std::string_view text);
  size_t size() const { return cp.size(); }
};

}  // namespace flashdesk
