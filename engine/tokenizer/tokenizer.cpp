// The Tokenizer: added-token passes, normalization, pre-tokenization, cached BPE, decoding.
#include "engine/tokenizer/tokenizer.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <mutex>
#include <sstream>

#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/tokenizer_json.h"
#include "engine/tokenizer/utf8.h"
#include "engine/tokenizer/word_cache.h"
#include "engine/util/error.h"
#include "engine/util/sha256.h"

namespace flashdesk {
namespace {

enum class TokenKind : uint8_t { kNone, kModel, kAdded, kSpecial };

struct EncodeScratch {
  PreTokenizerScratch pre;
  BpeScratch bpe;
  std::vector<Piece> pieces;
  std::vector<TextSegment> raw_segments, normalized_segments;
};

std::vector<AddedToken> select(const std::vector<AddedToken>& all, bool normalized) {
  std::vector<AddedToken> out;
  for (const AddedToken& t : all)
    if (t.normalized == normalized) out.push_back(t);
  return out;
}

std::vector<std::string> contents(const std::vector<AddedToken>& tokens, const Normalizer* n) {
  std::vector<std::string> out;
  for (const AddedToken& t : tokens) out.push_back(n ? n->apply(t.content) : t.content);
  return out;
}

std::optional<uint8_t> fallback_byte(std::string_view s) {  // "<0xAB>" -> 0xAB
  if (s.size() != 6 || s.substr(0, 3) != "<0x" || s[5] != '>') return std::nullopt;
  unsigned v = 0;
  for (char c : s.substr(3, 2)) {
    const int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
    if (d < 0) return std::nullopt;
    v = v * 16 + static_cast<unsigned>(d);
  }
  return static_cast<uint8_t>(v);
}

}  // namespace

struct Tokenizer::Impl {
  std::string source;
  std::string sha256;  // of the JSON text
  int64_t size = 0;    // distinct token strings (len(tokenizer))
  BpeModel model;
  Normalizer normalizer;
  PreTokenizerSpec pre;
  AddedTokenMatcher raw_matcher;         // added tokens with normalized == false
  AddedTokenMatcher normalized_matcher;  // the others, matched after normalization
  StringIdMap added_ids;
  std::vector<std::string> bytes_by_id;  // what each id decodes to
  std::vector<TokenKind> kinds;
  mutable std::mutex cache_mutex;
  mutable WordCache cache;

  Impl(TokenizerParts parts, std::string file)
      : source(std::move(file)),
        model(std::move(parts.model), source),
        normalizer(std::move(parts.normalizer)),
        pre(std::move(parts.pre_tokenizer)),
        raw_matcher(select(parts.added_tokens, false),
                    contents(select(parts.added_tokens, false), nullptr)),
        normalized_matcher(select(parts.added_tokens, true),
                           contents(select(parts.added_tokens, true), &normalizer)) {
    build_decode_table(parts.added_tokens, parts.decoder);
    count_distinct_strings(parts.added_tokens);
  }

  // HF merges the vocab and the added tokens into one string -> id map and counts its entries.
  void count_distinct_strings(const std::vector<AddedToken>& added) {
    for (TokenId id = 0; id < model.id_bound(); ++id)
      if (model.spelling(id)) ++size;
    StringIdMap counted;
    for (const AddedToken& t : added)
      if (!model.token_id(t.content) && counted.insert(t.content, t.id)) ++size;
  }

  void build_decode_table(const std::vector<AddedToken>& added, const DecoderSpec& decoder) {
    TokenId bound = model.id_bound();
    for (const AddedToken& t : added) bound = std::max(bound, t.id + 1);
    bytes_by_id.assign(bound, {});
    kinds.assign(bound, TokenKind::kNone);
    for (TokenId id = 0; id < model.id_bound(); ++id) {
      const std::string* s = model.spelling(id);
      if (!s) continue;
      kinds[id] = TokenKind::kModel;
      const auto fb = decoder.byte_fallback ? fallback_byte(*s) : std::nullopt;
      // HF's ByteLevel decoder keeps a spelling outside the byte alphabet as it is.
      bytes_by_id[id] = fb ? std::string(1, static_cast<char>(*fb))
                           : (decoder.byte_level ? byte_level::unspell(*s).value_or(*s) : *s);
    }
    for (size_t i = 0; i < added.size(); ++i) add_token(added[i], i);
  }

  void add_token(const AddedToken& t, size_t index) {
    const std::string field = "added_tokens[" + std::to_string(index) + "]";
    const std::string* vocab_spelling = model.spelling(t.id);
    if (vocab_spelling && *vocab_spelling != t.content)
      throw FormatError(source, field + ": id " + std::to_string(t.id) + " is \"" +
                                    *vocab_spelling + "\" in model.vocab, not \"" + t.content +
                                    "\"");
    const auto previous = added_ids.find(t.content);
    if (previous && *previous != t.id)
      throw FormatError(source, field + ": \"" + t.content + "\" appears with ids " +
                                    std::to_string(*previous) + " and " + std::to_string(t.id));
    added_ids.insert(t.content, t.id);
    const bool id_taken = kinds[t.id] == TokenKind::kAdded || kinds[t.id] == TokenKind::kSpecial;
    if (id_taken && bytes_by_id[t.id] != t.content)
      throw FormatError(source, field + ": duplicate id " + std::to_string(t.id));
    kinds[t.id] = t.special ? TokenKind::kSpecial : TokenKind::kAdded;
    bytes_by_id[t.id] = t.content;  // added tokens decode to their text, never byte-mapped
  }

  void encode_text(std::string_view text, EncodeScratch& s, WordCache* cache_or_null,
                   std::vector<TokenId>& out) const {
    s.pieces.clear();
    const std::string_view split_text = pre_tokenize(pre, text, s.pre, s.pieces);
    for (const Piece& p : s.pieces) {
      const std::string_view bytes = split_text.substr(p.begin, p.end - p.begin);
      WordCache* c = bytes.size() > WordCache::kMaxPieceBytes ? nullptr : cache_or_null;
      if (c && c->find(bytes, out)) continue;
      const size_t before = out.size();
      model.encode_piece(bytes, s.bpe, out);
      if (c) c->insert(bytes, std::span(out).subspan(before));
    }
  }

  // A stretch of text between raw-matched added tokens: normalize, then the second pass.
  void encode_gap(std::string_view gap, EncodeScratch& s, WordCache* c, std::vector<TokenId>& out,
                  bool match) const {
    std::string normalized;
    if (!normalizer.identity()) normalized = normalizer.apply(gap), gap = normalized;
    if (!match || normalized_matcher.empty()) return encode_text(gap, s, c, out);
    s.normalized_segments.clear();
    normalized_matcher.split(gap, s.normalized_segments);
    for (const TextSegment& seg : s.normalized_segments) {
      if (seg.token >= 0)
        out.push_back(seg.token);
      else
        encode_text(gap.substr(seg.begin, seg.end - seg.begin), s, c, out);
    }
  }

  void encode(std::string_view text, std::vector<TokenId>& out, EncodeOptions options) const {
    if (text.size() >= UINT32_MAX) throw InvalidRequest("text to encode is larger than 4 GiB");
    EncodeScratch s;
    // One encode at a time uses the cache; a concurrent one runs uncached rather than wait.
    std::unique_lock lock(cache_mutex, std::try_to_lock);
    WordCache* c = lock.owns_lock() ? &cache : nullptr;
    if (!options.match_added_tokens || raw_matcher.empty())
      return encode_gap(text, s, c, out, options.match_added_tokens);
    raw_matcher.split(text, s.raw_segments);
    for (const TextSegment& seg : s.raw_segments) {
      if (seg.token >= 0)
        out.push_back(seg.token);
      else
        encode_gap(text.substr(seg.begin, seg.end - seg.begin), s, c, out, true);
    }
  }

  std::string_view bytes_of(TokenId id, DecodeOptions options) const {
    if (id < 0 || id >= static_cast<TokenId>(kinds.size()) || kinds[id] == TokenKind::kNone)
      throw InvalidRequest("token id " + std::to_string(id) + " is not in tokenizer " + source);
    if (options.skip_special && kinds[id] == TokenKind::kSpecial) return {};
    return bytes_by_id[id];
  }
};

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_json(std::string_view json_text, const std::string& source) {
  auto impl = std::make_unique<Impl>(parse_tokenizer_json(json_text, source), source);
  Sha256 h;
  h.update(json_text);
  impl->sha256 = Sha256::hex(h.finish());
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open tokenizer file " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw IoError("cannot read tokenizer file " + path.string());
  return from_json(text.str(), path.string());
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, EncodeOptions options) const {
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 3 + 4);
  impl_->encode(text, ids, options);
  return ids;
}

void Tokenizer::encode_into(std::string_view text, std::vector<TokenId>& out,
                            EncodeOptions options) const {
  impl_->encode(text, out, options);
}

std::string Tokenizer::decode_bytes(std::span<const TokenId> ids, DecodeOptions options) const {
  std::string out;
  for (TokenId id : ids) out.append(impl_->bytes_of(id, options));
  return out;
}

std::string Tokenizer::decode(std::span<const TokenId> ids, DecodeOptions options) const {
  return utf8::to_valid(decode_bytes(ids, options));
}

std::string_view Tokenizer::token_bytes(TokenId id, DecodeOptions options) const {
  return impl_->bytes_of(id, options);
}

std::optional<TokenId> Tokenizer::token_id(std::string_view spelling) const {
  if (const auto id = impl_->added_ids.find(spelling)) return id;
  return impl_->model.token_id(spelling);
}

TokenId Tokenizer::require_token_id(std::string_view spelling) const {
  if (const auto id = token_id(spelling)) return *id;
  throw FormatError(impl_->source, "has no token \"" + std::string(spelling) + "\"");
}

bool Tokenizer::contains(TokenId id) const {
  return id >= 0 && id < id_bound() && impl_->kinds[id] != TokenKind::kNone;
}

bool Tokenizer::is_special(TokenId id) const {
  return contains(id) && impl_->kinds[id] == TokenKind::kSpecial;
}

TokenId Tokenizer::id_bound() const {
  return static_cast<TokenId>(impl_->kinds.size());
}

int64_t Tokenizer::size() const {
  return impl_->size;
}

std::optional<std::string_view> Tokenizer::token_string(TokenId id) const {
  if (!contains(id)) return std::nullopt;
  if (impl_->kinds[id] == TokenKind::kModel) return *impl_->model.spelling(id);
  return impl_->bytes_by_id[id];  // an added token: its content
}

const std::string& Tokenizer::source() const {
  return impl_->source;
}

const std::string& Tokenizer::sha256() const {
  return impl_->sha256;
}

}  // namespace flashdesk
