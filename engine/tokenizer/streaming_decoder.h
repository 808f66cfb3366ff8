// Turns generated ids into text as they arrive, never emitting half a UTF-8 character.
#pragma once

#include <string>

#include "engine/tokenizer/tokenizer.h"

namespace flashdesk {

// Byte-level tokens often split a character (an emoji is typically 2-4 tokens). push() returns
// only complete characters and holds back an incomplete tail until the bytes that finish it
// arrive; an ill-formed sequence is emitted as U+FFFD at once. The concatenation of every
// push() and finish() equals tokenizer.decode() of all the ids.
class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer, DecodeOptions options = {});

  // The text that became complete with this id (possibly empty).
  std::string push(TokenId id);
  // Whatever is still held back, as U+FFFD (the stream ended inside a character).
  std::string finish();
  // Bytes currently held back (0..3).
  size_t pending() const { return pending_.size(); }

 private:
  const Tokenizer& tokenizer_;
  DecodeOptions options_;
  std::string pending_;
};

}  // namespace flashdesk
