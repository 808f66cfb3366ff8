// Parsing tokenizer.json (HF tokenizers' serialization) into the parts our Tokenizer runs.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/added_tokens.h"
#include "engine/tokenizer/bpe_model.h"
#include "engine/tokenizer/normalizer.h"
#include "engine/tokenizer/pre_tokenizer.h"

namespace flashdesk {

// How ids turn back into bytes (the "decoder" object).
struct DecoderSpec {
  bool byte_level = false;     // ByteLevel: token spellings are GPT-2 byte alphabet
  bool byte_fallback = false;  // ByteFallback: <0xXX> tokens are raw bytes
};

struct TokenizerParts {
  BpeSpec model;
  std::vector<AddedToken> added_tokens;
  Normalizer normalizer;
  PreTokenizerSpec pre_tokenizer;
  DecoderSpec decoder;
};

// Parses the JSON text; `file` names the source in errors. Anything malformed or outside the
// supported subset is a FormatError naming the file and the field (e.g. `model.type`).
// post_processor, truncation and padding are ignored: we never add BOS/EOS implicitly.
TokenizerParts parse_tokenizer_json(std::string_view json_text, const std::string& file);

}  // namespace flashdesk
