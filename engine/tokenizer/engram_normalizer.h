// The text normalisation of Engram's compressed-token map, as the official engram.py builds it
// with HF `tokenizers` normalizers: NFKC, NFD, StripAccents (drop every combining mark: General
// Category Mn, Mc, Me), Lowercase (each character's full lowercase mapping on its own, no
// context such as final sigma), the regex `[ \t\r\n]+` -> " ", a text that is exactly " " kept
// through a U+E000 sentinel, Strip (White_Space at both ends), then every U+E000 -> " ".
//
// Goals: the same strings as the official code, with ICU's Unicode data (Debian libicu-dev)
// rather than hand-written tables. Non-goals: other normalizer sequences.
#pragma once

#include <string>
#include <string_view>

namespace flashdesk {

// `text` must be valid UTF-8 (the caller keys undecodable tokens by their raw string instead).
std::string engram_normalize(std::string_view text);

// The Unicode version of the normalisation data ("15.0"): part of the map cache's key, since a
// newer ICU may normalise some characters differently.
const char* engram_normalizer_unicode_version();

}  // namespace flashdesk
