// Engram's compressed-token map (docs/model-spec.md §7 step 1) built from the tokenizer, as the
// official engram.py builds it at load: for every id 0 .. len(tokenizer)-1, the id decoded alone
// (added tokens verbatim, the rest through the byte-level decoder, no cleanup); a text holding
// U+FFFD (a partial UTF-8 byte token) is keyed by the raw token string, any other by
// engram_normalize(text), or by the text itself when that normalises to "". Distinct keys get
// consecutive compressed ids in token-id order.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace flashdesk {

struct CompressedTokenMap {
  std::vector<int64_t> ids;  // [len(tokenizer)]: the compressed id of each token id
  int64_t size = 0;          // distinct keys: what engram_compressed_vocab_size must be
};

CompressedTokenMap build_compressed_token_map(const Tokenizer& tokenizer);

}  // namespace flashdesk
