// Resolving the special-token spellings against a tokenizer (see special_tokens.h).
#include "engine/tokenizer/special_tokens.h"

namespace flashdesk {

SpecialTokenIds SpecialTokenIds::from(const Tokenizer& t) {
  return SpecialTokenIds{
      .bos = t.require_token_id(spelling::kBos),
      .eos = t.require_token_id(spelling::kEos),
      .pad = t.require_token_id(spelling::kPad),
      .user = t.require_token_id(spelling::kUser),
      .assistant = t.require_token_id(spelling::kAssistant),
      .system = t.require_token_id(spelling::kSystem),
      .think_begin = t.require_token_id(spelling::kThinkBegin),
      .think_end = t.require_token_id(spelling::kThinkEnd),
      .image = t.require_token_id(spelling::kImage),
  };
}

}  // namespace flashdesk
