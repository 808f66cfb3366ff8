// Content keys of SSD KV blocks: a chained XXH3-128 over (model fingerprint, parent block key,
// the block's token ids, the images inside the block). Equal prompt prefixes give equal keys in any
// process, on any day; a different model fingerprint gives different keys. The byte layout is
// documented in docs/kv-block-store.md and must never change for key version 2 (version 1 named
// images by XXH3-128; its keys are simply never asked for again).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "storage/digest.h"
#include "storage/session_types.h"

namespace flashdesk::storage {

using BlockKey = Digest128;

// An image inside a prompt: its placeholder tokens are [begin, begin + length) of the prompt.
struct ImageSpan {
  ImageDigest digest;
  int64_t begin = 0;
  int64_t length = 0;
  bool operator==(const ImageSpan&) const = default;
};

// The key of the block holding prompt tokens [block_start, block_start + tokens.size()).
// `images` are the prompt's images (any order); those overlapping the block enter the key with
// their begin relative to block_start. The first block has no parent.
BlockKey block_key(std::string_view model_fingerprint, const std::optional<BlockKey>& parent,
                   std::span<const TokenId> tokens, std::span<const ImageSpan> images,
                   int64_t block_start);

// Keys of every full block of `prompt`: keys[i] covers tokens [i*B, (i+1)*B) and chains keys[i-1].
std::vector<BlockKey> chain_block_keys(std::string_view model_fingerprint,
                                       std::span<const TokenId> prompt,
                                       std::span<const ImageSpan> images, int64_t tokens_per_block);

// A digest of the whole of `prompt` (the chain of its full blocks, then its partial tail): what the
// DRAM window pool checks before handing a parked window to a prompt.
Digest128 prefix_digest(std::string_view model_fingerprint, std::span<const TokenId> prompt,
                        std::span<const ImageSpan> images, int64_t tokens_per_block);

}  // namespace flashdesk::storage
