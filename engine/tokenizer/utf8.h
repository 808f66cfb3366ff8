// UTF-8 decoding with the Unicode "maximal subpart" rule for invalid bytes, shared by the
// pre-tokenizer, the decoders and the streaming decoder so all three agree byte for byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace flashdesk::utf8 {

// One decoded unit of a byte string: a code point, or an invalid maximal subpart (a truncated
// or ill-formed sequence, at least one byte) that a lossy conversion replaces by one U+FFFD.
struct Unit {
  uint32_t cp;    // the code point; kInvalid for an ill-formed subpart
  uint32_t size;  // bytes consumed, 1..4
  bool valid() const { return cp != kInvalid; }
  static constexpr uint32_t kInvalid = 0xFFFFFFFFu;
};

// Decodes the unit at p (p < end). An ill-formed subpart ends at the first byte that cannot
// continue it, exactly as WHATWG TextDecoder and Rust's from_utf8_lossy do.
inline Unit decode(const uint8_t* p, const uint8_t* end) {
  const uint8_t b0 = p[0];
  if (b0 < 0x80) return {b0, 1};
  uint32_t need, cp;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1, cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2, cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;  // no overlong forms
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3, cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;  // no overlong forms
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return {Unit::kInvalid, 1};
  }
  uint32_t i = 1;
  for (; i <= need; ++i) {
    if (p + i >= end) return {Unit::kInvalid, i};
    const uint8_t b = p[i];
    if (b < lo || b > hi) return {Unit::kInvalid, i};
    lo = 0x80, hi = 0xBF;
    cp = (cp << 6) | (b & 0x3F);
  }
  return {cp, need + 1};
}

inline Unit decode(std::string_view s, size_t pos) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  return decode(p + pos, p + s.size());
}

bool is_valid(std::string_view bytes);

// The bytes with every ill-formed subpart replaced by U+FFFD (EF BF BD).
std::string to_valid(std::string_view bytes);

// Length of the trailing bytes that form an incomplete but so far well-formed sequence (0..3):
// a streaming decoder holds them back until the rest arrives.
size_t incomplete_tail(std::string_view bytes);

// Appends the UTF-8 encoding of a code point (< 0x110000, not a surrogate).
void append(std::string& out, uint32_t cp);

}  // namespace flashdesk::utf8
