// Helpers of the KV block store tests: synthetic prompts, payloads derived from keys, spilling.
#pragma once

#include <cstring>
#include <future>

#include "storage/kv_block_store.h"
#include "storage_test_util.h"

namespace flashdesk::storage::testing {

inline constexpr int64_t kTestBlockTokens = 16;
inline constexpr size_t kBytesPerToken = 890;  // the full-size persisted bytes per token

inline std::vector<TokenId> prompt_tokens(uint64_t seed, size_t n) {
  const auto bytes = pattern_bytes(seed, 4 * n);
  std::vector<TokenId> out(n);
  for (size_t i = 0; i < n; ++i) {
    uint32_t v;
    std::memcpy(&v, &bytes[4 * i], 4);
    out[i] = static_cast<TokenId>(v % 129280);
  }
  return out;
}

// The payload a block with this key carries in these tests: any reader can recheck it.
inline std::vector<uint8_t> payload_for(const BlockKey& key, int64_t tokens = kTestBlockTokens) {
  uint64_t seed;
  std::memcpy(&seed, key.bytes.data(), sizeof seed);
  return pattern_bytes(seed, static_cast<size_t>(tokens) * kBytesPerToken);
}

// Queues every full block of the prompt; returns the outcomes' futures.
inline std::vector<std::future<WriteOutcome>> put_prompt(
    KvBlockStore& store, const std::string& fingerprint, std::span<const TokenId> prompt,
    std::optional<int64_t> session = std::nullopt, std::span<const ImageSpan> images = {}) {
  const auto keys = chain_block_keys(fingerprint, prompt, images, store.tokens_per_block());
  std::vector<std::future<WriteOutcome>> out;
  for (size_t i = 0; i < keys.size(); ++i) {
    BlockWrite w;
    w.key = keys[i];
    if (i > 0) w.parent = keys[i - 1];
    w.model_fingerprint = fingerprint;
    w.token_count = store.tokens_per_block();
    w.payload = payload_for(keys[i], store.tokens_per_block());
    w.session_id = session;
    out.push_back(store.put(std::move(w)));
  }
  return out;
}

inline std::vector<WriteOutcome> spill(KvBlockStore& store, const std::string& fingerprint,
                                       std::span<const TokenId> prompt,
                                       std::optional<int64_t> session = std::nullopt) {
  std::vector<WriteOutcome> outcomes;
  for (auto& f : put_prompt(store, fingerprint, prompt, session)) outcomes.push_back(f.get());
  return outcomes;
}

}  // namespace flashdesk::storage::testing
