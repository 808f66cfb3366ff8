// The special tokens the engine and the chat format use, looked up by spelling: the demo model's
// small tokenizer and the real V4.1 one spell them alike but number them differently.
#pragma once

#include <string_view>

#include "engine/tokenizer/tokenizer.h"

namespace flashdesk {

// Spellings exactly as in DeepSeek's tokenizer.json (U+FF5C fullwidth bar, U+2581 lower block).
namespace spelling {
inline constexpr std::string_view kBos = "<｜begin▁of▁sentence｜>";
inline constexpr std::string_view kEos = "<｜end▁of▁sentence｜>";
inline constexpr std::string_view kPad = "<｜▁pad▁｜>";
inline constexpr std::string_view kUser = "<｜User｜>";
inline constexpr std::string_view kAssistant = "<｜Assistant｜>";
inline constexpr std::string_view kSystem = "<｜System｜>";
inline constexpr std::string_view kThinkBegin = "<think>";
inline constexpr std::string_view kThinkEnd = "</think>";
inline constexpr std::string_view kImage = "<｜deepseek_image｜>";
}  // namespace spelling

struct SpecialTokenIds {
  TokenId bos, eos, pad, user, assistant, system, think_begin, think_end, image;

  // Looks every spelling up; a tokenizer without one of them is a FormatError naming its file.
  static SpecialTokenIds from(const Tokenizer& tokenizer);
};

}  // namespace flashdesk
