// The chained block key: serialise the documented fields little-endian, hash with XXH3-128 seed 0.
#include "storage/kv_block_key.h"

#include <algorithm>
#include <string>

#include "engine/util/error.h"

namespace flashdesk::storage {

namespace {

constexpr std::string_view kKeyDomain = "fdkv-key-v2";  // v2: 32-byte SHA-256 image digests

template <class T>
void put_le(std::vector<uint8_t>& out, T value) {
  using U = std::make_unsigned_t<T>;
  auto u = static_cast<U>(value);
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<uint8_t>(u >> (8 * i)));
}

void put_bytes(std::vector<uint8_t>& out, std::span<const uint8_t> bytes) {
  out.insert(out.end(), bytes.begin(), bytes.end());
}

bool overlaps(const ImageSpan& image, int64_t start, int64_t end) {
  return image.begin < end && image.begin + image.length > start;
}

}  // namespace

BlockKey block_key(std::string_view model_fingerprint, const std::optional<BlockKey>& parent,
                   std::span<const TokenId> tokens, std::span<const ImageSpan> images,
                   int64_t block_start) {
  std::vector<uint8_t> bytes;
  bytes.reserve(64 + model_fingerprint.size() + 4 * tokens.size() + 48 * images.size());
  put_bytes(bytes, as_bytes(kKeyDomain));
  put_le<uint32_t>(bytes, static_cast<uint32_t>(model_fingerprint.size()));
  put_bytes(bytes, as_bytes(model_fingerprint));
  put_bytes(bytes, parent ? std::span<const uint8_t>(parent->bytes) : BlockKey{}.bytes);
  put_le<uint32_t>(bytes, static_cast<uint32_t>(tokens.size()));
  for (TokenId t : tokens) put_le<int32_t>(bytes, t);

  const int64_t end = block_start + static_cast<int64_t>(tokens.size());
  std::vector<ImageSpan> inside;
  for (const ImageSpan& image : images)
    if (overlaps(image, block_start, end)) inside.push_back(image);
  std::stable_sort(inside.begin(), inside.end(),
                   [](const ImageSpan& a, const ImageSpan& b) { return a.begin < b.begin; });
  put_le<uint32_t>(bytes, static_cast<uint32_t>(inside.size()));
  for (const ImageSpan& image : inside) {
    put_le<int64_t>(bytes, image.begin - block_start);
    put_le<int64_t>(bytes, image.length);
    put_bytes(bytes, image.digest.bytes);
  }
  return xxh3_128(bytes);
}

std::vector<BlockKey> chain_block_keys(std::string_view model_fingerprint,
                                       std::span<const TokenId> prompt,
                                       std::span<const ImageSpan> images,
                                       int64_t tokens_per_block) {
  FD_CHECK(tokens_per_block > 0, "tokens_per_block must be positive");
  const size_t block = static_cast<size_t>(tokens_per_block);
  std::vector<BlockKey> keys;
  keys.reserve(prompt.size() / block);
  std::optional<BlockKey> parent;
  for (size_t start = 0; start + block <= prompt.size(); start += block) {
    parent = block_key(model_fingerprint, parent, prompt.subspan(start, block), images,
                       static_cast<int64_t>(start));
    keys.push_back(*parent);
  }
  return keys;
}

Digest128 prefix_digest(std::string_view model_fingerprint, std::span<const TokenId> prompt,
                        std::span<const ImageSpan> images, int64_t tokens_per_block) {
  const std::vector<BlockKey> full =
      chain_block_keys(model_fingerprint, prompt, images, tokens_per_block);
  const size_t covered = full.size() * static_cast<size_t>(tokens_per_block);
  std::optional<BlockKey> parent;
  if (!full.empty()) parent = full.back();
  // The tail may be empty: its key still differs from the last block's (it chains it).
  return block_key(model_fingerprint, parent, prompt.subspan(covered), images,
                   static_cast<int64_t>(covered));
}

}  // namespace flashdesk::storage
