// Incremental UTF-8-safe decoding (see streaming_decoder.h).
#include "engine/tokenizer/streaming_decoder.h"

#include "engine/tokenizer/utf8.h"

namespace flashdesk {

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, DecodeOptions options)
    : tokenizer_(tokenizer), options_(options) {}

std::string StreamingDecoder::push(TokenId id) {
  pending_.append(tokenizer_.token_bytes(id, options_));
  const size_t hold = utf8::incomplete_tail(pending_);
  std::string out = utf8::to_valid(std::string_view(pending_).substr(0, pending_.size() - hold));
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StreamingDecoder::finish() {
  std::string out = utf8::to_valid(pending_);
  pending_.clear();
  return out;
}

}  // namespace flashdesk
