// The GPT-2 byte-level alphabet (see byte_level.h).
#include "engine/tokenizer/byte_level.h"

#include "engine/tokenizer/utf8.h"

namespace flashdesk::byte_level {
namespace {

bool spells_itself(uint32_t b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Tables {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 0x144> from_cp{};  // the alphabet lies below U+0144
  Tables() {
    from_cp.fill(-1);
    uint32_t next = 0x100;
    for (uint32_t b = 0; b < 256; ++b) {
      to_cp[b] = spells_itself(b) ? b : next++;
      from_cp[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;  // immutable lookup data, built once
  return t;
}

}  // namespace

uint32_t byte_to_code_point(uint8_t b) {
  return tables().to_cp[b];
}

std::optional<uint8_t> code_point_to_byte(uint32_t cp) {
  if (cp >= tables().from_cp.size() || tables().from_cp[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(tables().from_cp[cp]);
}

std::string spell_byte(uint8_t b) {
  std::string s;
  utf8::append(s, byte_to_code_point(b));
  return s;
}

std::optional<std::string> unspell(std::string_view spelling) {
  std::string bytes;
  for (size_t i = 0; i < spelling.size();) {
    const utf8::Unit u = utf8::decode(spelling, i);
    if (!u.valid()) return std::nullopt;
    const auto b = code_point_to_byte(u.cp);
    if (!b) return std::nullopt;
    bytes.push_back(static_cast<char>(*b));
    i += u.size;
  }
  return bytes;
}

}  // namespace flashdesk::byte_level
