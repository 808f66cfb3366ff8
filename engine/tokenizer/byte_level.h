// The GPT-2 byte-level alphabet: each byte is spelled as one printable code point in the vocab.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace flashdesk::byte_level {

// Code point that spells byte b in a byte-level vocab: printable Latin-1 bytes spell themselves,
// the other 68 bytes (controls, space, DEL, NBSP, soft hyphen) take U+0100.. in byte order.
uint32_t byte_to_code_point(uint8_t b);

// The byte a code point spells, if it is in the alphabet.
std::optional<uint8_t> code_point_to_byte(uint32_t cp);

// The vocab spelling (UTF-8) of byte b, e.g. "Ġ" for ' '.
std::string spell_byte(uint8_t b);

// The bytes a vocab spelling stands for; nullopt when it uses a code point outside the alphabet.
std::optional<std::string> unspell(std::string_view spelling);

}  // namespace flashdesk::byte_level
