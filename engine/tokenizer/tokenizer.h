// The tokenizer of a model: HF tokenizer.json byte-level BPE, encoding exactly as DeepSeek's.
//
// Goals: the same ids as HF tokenizers / transformers.js for DeepSeek's tokenizer.json (checked
// against an independent implementation on a large corpus); fast encode (word cache, no regex
// engine); decode with correct UTF-8 handling, also token by token (StreamingDecoder).
// Non-goals: training, offsets, padding/truncation, post-processing (BOS/EOS are never added
// implicitly: the chat template places them), tokenizer types other than BPE.
//
// Input that is not valid UTF-8 is still encoded: each ill-formed subpart is one unit of class
// "other" for the pre-tokenizer and its raw bytes go through byte-level BPE, so decode_bytes()
// returns the input exactly; decode() returns valid UTF-8 (U+FFFD for ill-formed subparts).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace flashdesk {

using TokenId = int32_t;

struct EncodeOptions {
  // Find added tokens (special or not) in the text, as HF does. Off: the text is encoded as
  // plain text even where it spells "<｜User｜>", e.g. for untrusted content.
  bool match_added_tokens = true;
};

struct DecodeOptions {
  bool skip_special = false;  // leave out added tokens flagged special (BOS, EOS, ...)
};

class Tokenizer {
 public:
  // Reads and parses tokenizer.json: IoError when unreadable, FormatError (naming the file and
  // the field) when malformed or outside what we implement.
  static Tokenizer from_file(const std::filesystem::path& path);
  // `source` names the text in errors.
  static Tokenizer from_json(std::string_view json_text, const std::string& source);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Ids of the text; never adds BOS/EOS. Thread-safe.
  std::vector<TokenId> encode(std::string_view text, EncodeOptions options = {}) const;
  // Appends the ids of the text to `out`.
  void encode_into(std::string_view text, std::vector<TokenId>& out,
                   EncodeOptions options = {}) const;

  // UTF-8 text of the ids (ill-formed byte sequences become U+FFFD). An id the tokenizer does
  // not have is an InvalidRequest.
  std::string decode(std::span<const TokenId> ids, DecodeOptions options = {}) const;
  // The exact bytes of the ids, which may end inside a multi-byte character.
  std::string decode_bytes(std::span<const TokenId> ids, DecodeOptions options = {}) const;
  // The bytes one token stands for (empty for a skipped special token).
  std::string_view token_bytes(TokenId id, DecodeOptions options = {}) const;

  // The id of a token by its spelling in the file (added tokens first, then the vocab).
  std::optional<TokenId> token_id(std::string_view spelling) const;
  // Same, but a missing token is a FormatError naming the tokenizer file.
  TokenId require_token_id(std::string_view spelling) const;
  bool contains(TokenId id) const;
  bool is_special(TokenId id) const;
  // One more than the largest id (the embedding rows the tokenizer needs).
  TokenId id_bound() const;
  // len(tokenizer) as HF counts it: the distinct token strings of model.vocab and added_tokens
  // (equal to id_bound() unless ids are skipped). Engram's token map has this many entries.
  int64_t size() const;
  // The token's string as tokenizer.json spells it (HF id_to_token): an added token's content,
  // else its model.vocab spelling (byte-level alphabet); nullopt for an id with no token.
  std::optional<std::string_view> token_string(TokenId id) const;
  const std::string& source() const;
  // Lowercase hex SHA-256 of the tokenizer.json text this was read from: keys what is built
  // from it (the Engram token map cache).
  const std::string& sha256() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace flashdesk
