// BPE: vocab validation, merge table, and merging a piece's symbols by rank (see bpe_model.h).
#include "engine/tokenizer/bpe_model.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <functional>

#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/utf8.h"
#include "engine/util/error.h"

namespace flashdesk {
namespace {

// Pieces up to this many symbols merge by rescanning a rank array, longer ones through a heap
// (O(n log n)), so pathological pieces such as a megabyte of spaces stay linear-ish.
constexpr size_t kSmallPiece = 48;
constexpr int32_t kNoMerge = INT32_MAX;

std::string quoted(std::string_view s) {
  std::string q = "\"";
  q.append(s.substr(0, 64));
  if (s.size() > 64) q.append("...");
  return q + "\"";
}

}  // namespace

BpeModel::BpeModel(BpeSpec spec, const std::string& file)
    : merges_(spec.merges.size()),
      byte_level_(spec.byte_level),
      byte_fallback_(spec.byte_fallback),
      ignore_merges_(spec.ignore_merges) {
  build_vocab(spec.vocab, file);
  build_merges(spec.merges, file);
  if (spec.unk_token) {
    unk_id_ = token_id(*spec.unk_token);
    if (!unk_id_)
      throw FormatError(file,
                        "model.unk_token: " + quoted(*spec.unk_token) + " is not in model.vocab");
  }
  if (byte_level_) {
    for (int b = 0; b < 256; ++b) {
      const auto id = token_id(byte_level::spell_byte(static_cast<uint8_t>(b)));
      if (!id)
        throw FormatError(
            file, "model.vocab: byte-level vocab has no token for byte " + std::to_string(b));
      byte_ids_[b] = *id;
    }
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    fallback_ids_[b] = token_id(name).value_or(-1);
  }
}

void BpeModel::build_vocab(std::vector<std::pair<std::string, int32_t>>& vocab,
                           const std::string& file) {
  int32_t bound = 0;
  for (const auto& [spelling, id] : vocab) {
    if (id < 0 || id > kMaxTokenId)
      throw FormatError(file, "model.vocab: id " + std::to_string(id) + " of " + quoted(spelling) +
                                  " is out of range");
    bound = std::max(bound, id + 1);
  }
  spellings_.assign(bound, {});
  used_.assign(bound, false);
  ids_.reserve(vocab.size());
  for (auto& [spelling, id] : vocab) {
    if (used_[id])
      throw FormatError(file, "model.vocab: duplicate id " + std::to_string(id) + " (" +
                                  quoted(spellings_[id]) + " and " + quoted(spelling) + ")");
    if (!ids_.insert(spelling, id))
      throw FormatError(file, "model.vocab: duplicate token " + quoted(spelling));
    used_[id] = true;
    spellings_[id] = std::move(spelling);
  }
}

void BpeModel::build_merges(const std::vector<std::pair<std::string, std::string>>& merges,
                            const std::string& file) {
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const std::string field = "model.merges[" + std::to_string(rank) + "]: ";
    const auto l = ids_.find(left), r = ids_.find(right), m = ids_.find_concat(left, right);
    if (!l) throw FormatError(file, field + "refers to unknown token " + quoted(left));
    if (!r) throw FormatError(file, field + "refers to unknown token " + quoted(right));
    if (!m)
      throw FormatError(file, field + "result " + quoted(left + right) + " is not in model.vocab");
    // A repeated pair takes its last rank, as HF tokenizers and transformers.js both do.
    merges_.insert_or_assign(*l, *r, BpeMerge{static_cast<int32_t>(rank), *m});
  }
}

std::optional<int32_t> BpeModel::token_id(std::string_view spelling) const {
  return ids_.find(spelling);
}

const std::string* BpeModel::spelling(int32_t id) const {
  if (id < 0 || id >= id_bound() || !used_[id]) return nullptr;
  return &spellings_[id];
}

int32_t BpeModel::pair_rank(int32_t left, int32_t right) const {
  const BpeMerge* m = merges_.find(left, right);
  return m ? m->rank : kNoMerge;
}

void BpeModel::append_char_symbols(std::string_view ch, std::vector<int32_t>& symbols) const {
  if (const auto id = token_id(ch)) {
    symbols.push_back(*id);
    return;
  }
  const bool all_bytes = std::all_of(
      ch.begin(), ch.end(), [&](char c) { return fallback_ids_[static_cast<uint8_t>(c)] >= 0; });
  if (byte_fallback_ && all_bytes) {
    for (char c : ch) symbols.push_back(fallback_ids_[static_cast<uint8_t>(c)]);
  } else if (unk_id_) {
    symbols.push_back(*unk_id_);
  }
  // With neither, HF drops the character; so do we (byte-level vocabs never get here).
}

void BpeModel::initial_symbols(std::string_view bytes, BpeScratch& s) const {
  s.symbols.clear();
  if (byte_level_) {
    for (char c : bytes) s.symbols.push_back(byte_ids_[static_cast<uint8_t>(c)]);
    return;
  }
  for (size_t i = 0; i < bytes.size();) {
    const utf8::Unit u = utf8::decode(bytes, i);
    append_char_symbols(bytes.substr(i, u.size), s.symbols);
    i += u.size;
  }
}

void BpeModel::encode_piece(std::string_view bytes, BpeScratch& s,
                            std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    s.spelling.clear();
    for (char c : bytes)
      s.spelling +=
          byte_level_ ? byte_level::spell_byte(static_cast<uint8_t>(c)) : std::string(1, c);
    if (const auto id = token_id(s.spelling)) {
      out.push_back(*id);
      return;
    }
  }
  initial_symbols(bytes, s);
  if (s.symbols.size() <= kSmallPiece)
    merge_small(s);
  else
    merge_large(s);
  out.insert(out.end(), s.symbols.begin(), s.symbols.end());
}

// Repeatedly merges the lowest-ranked adjacent pair (the leftmost one on ties), keeping the
// rank of every adjacent pair in an array so each step costs one scan and two lookups.
void BpeModel::merge_small(BpeScratch& s) const {
  auto& sym = s.symbols;
  auto& ranks = s.ranks;
  ranks.clear();
  for (size_t i = 0; i + 1 < sym.size(); ++i) ranks.push_back(pair_rank(sym[i], sym[i + 1]));
  while (!ranks.empty()) {
    const size_t best = std::min_element(ranks.begin(), ranks.end()) - ranks.begin();
    if (ranks[best] == kNoMerge) break;
    sym[best] = merges_.find(sym[best], sym[best + 1])->merged;
    sym.erase(sym.begin() + best + 1);
    ranks.erase(ranks.begin() + best);
    if (best > 0) ranks[best - 1] = pair_rank(sym[best - 1], sym[best]);
    if (best < ranks.size()) ranks[best] = pair_rank(sym[best], sym[best + 1]);
  }
}

// The same merge order through a min-heap of (rank, position) over a linked list of symbols;
// entries made stale by earlier merges are recognised and skipped when popped.
void BpeModel::merge_large(BpeScratch& s) const {
  auto& sym = s.symbols;
  const auto n = static_cast<int32_t>(sym.size());
  s.prev.resize(n);
  s.next.resize(n);
  for (int32_t i = 0; i < n; ++i) s.prev[i] = i - 1, s.next[i] = i + 1 < n ? i + 1 : -1;
  auto& heap = s.heap;
  heap.clear();
  const auto cmp = std::greater<std::pair<int32_t, int32_t>>();
  const auto push = [&](int32_t pos) {
    const int32_t r = pair_rank(sym[pos], sym[s.next[pos]]);
    if (r != kNoMerge) heap.emplace_back(r, pos), std::push_heap(heap.begin(), heap.end(), cmp);
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), cmp);
    const auto [rank, pos] = heap.back();
    heap.pop_back();
    const int32_t nxt = s.next[pos];
    if (sym[pos] < 0 || nxt < 0 || pair_rank(sym[pos], sym[nxt]) != rank) continue;
    sym[pos] = merges_.find(sym[pos], sym[nxt])->merged;
    sym[nxt] = -1;  // removed
    s.next[pos] = s.next[nxt];
    if (s.next[pos] >= 0) s.prev[s.next[pos]] = pos, push(pos);
    if (s.prev[pos] >= 0) push(s.prev[pos]);
  }
  sym.erase(std::remove(sym.begin(), sym.end(), -1), sym.end());
}

}  // namespace flashdesk
