// Unicode class flags for the tokenizer's hand-written pre-tokenizer patterns (no ICU, no PCRE).
#pragma once

#include <cstdint>

namespace flashdesk::unicode {

// One flag per regex class the patterns use; a code point may carry several (e.g. SPACE alone
// for U+0020, LETTER|WORD for 'a'). Unassigned code points (in kUnicodeVersion) carry none.
enum ClassFlag : uint8_t {
  kLetter = 1,   // \p{L}
  kMark = 2,     // \p{M}
  kNumber = 4,   // \p{N}
  kPunct = 8,    // \p{P}
  kSymbol = 16,  // \p{S}
  kSpace = 32,   // \s: Unicode White_Space, as in Oniguruma and Rust's regex (HF tokenizers)
  kWord = 64,    // \w (approximation: L, M, Nd, Nl, Pc, ZWNJ, ZWJ)
};

// The Unicode version the tables were generated from (tools/gen_unicode_tables.py).
extern const char kUnicodeVersion[];

uint8_t class_flags_slow(uint32_t cp);

// Flags of a code point; code points >= 0x110000 (or invalid bytes passed as such) have none.
inline uint8_t class_flags(uint32_t cp) {
  // ASCII answered inline: most text is ASCII and this sits in the tokenizer's inner loop.
  constexpr uint8_t L = kLetter | kWord, N = kNumber | kWord, P = kPunct, S = kSymbol, W = kSpace;
  static constexpr uint8_t kAscii[128] = {
      0, 0, 0, 0, 0, 0, 0, 0,
      0, W, W, W, W, W, 0, 0,  // 0x00
      0, 0, 0, 0, 0, 0, 0, 0,
      0, 0, 0, 0, 0, 0, 0, 0,  // 0x10
      W, P, P, P, S, P, P, P,
      P, P, P, S, P, P, P, P,  // ' ' ! " # $ % & ' ( ) * + , - . /
      N, N, N, N, N, N, N, N,
      N, N, P, P, S, S, S, P,  // 0-9 : ; < = > ?
      P, L, L, L, L, L, L, L,
      L, L, L, L, L, L, L, L,  // @ A-O
      L, L, L, L, L, L, L, L,
      L, L, L, P, P, P, S, static_cast<uint8_t>(P | kWord),  // P-Z [ \ ] ^ _
      S, L, L, L, L, L, L, L,
      L, L, L, L, L, L, L, L,  // ` a-o
      L, L, L, L, L, L, L, L,
      L, L, L, P, S, P, S, 0,  // p-z { | } ~ DEL
  };
  return cp < 128 ? kAscii[cp] : class_flags_slow(cp);
}

}  // namespace flashdesk::unicode
