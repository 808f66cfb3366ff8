// Encoding, parsing and verification of KV block files.
#include "storage/kv_block_file.h"

#include <cstring>

#include "engine/util/error.h"

namespace flashdesk::storage {

namespace {

constexpr uint8_t kMagic[8] = {'F', 'D', 'K', 'V', 'B', 'L', 'K', 0};
// Field offsets in the header (docs/kv-block-store.md).
constexpr size_t kOffVersion = 8, kOffHeaderSize = 12, kOffKey = 16, kOffParent = 32,
                 kOffTokens = 48, kOffFingerprintLen = 52, kOffPayloadSize = 56,
                 kOffPayloadChecksum = 64, kOffFingerprint = 72, kOffHeaderChecksum = 248;

template <class T>
void store_le(uint8_t* p, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<uint8_t>(value >> (8 * i));
}

template <class T>
T load_le(const uint8_t* p) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(p[i]) << (8 * i);
  return v;
}

BlockKey load_key(const uint8_t* p) {
  BlockKey k;
  std::memcpy(k.bytes.data(), p, k.bytes.size());
  return k;
}

}  // namespace

std::vector<uint8_t> encode_block_header(const BlockHeader& h) {
  FD_CHECK(h.model_fingerprint.size() <= kMaxFingerprintBytes, "model fingerprint too long");
  std::vector<uint8_t> out(kBlockHeaderSize, 0);
  uint8_t* p = out.data();
  std::memcpy(p, kMagic, sizeof kMagic);
  store_le<uint32_t>(p + kOffVersion, kBlockFormatVersion);
  store_le<uint32_t>(p + kOffHeaderSize, kBlockHeaderSize);
  std::memcpy(p + kOffKey, h.key.bytes.data(), 16);
  if (h.parent) std::memcpy(p + kOffParent, h.parent->bytes.data(), 16);
  store_le<uint32_t>(p + kOffTokens, h.token_count);
  store_le<uint32_t>(p + kOffFingerprintLen, static_cast<uint32_t>(h.model_fingerprint.size()));
  store_le<uint64_t>(p + kOffPayloadSize, h.payload_size);
  store_le<uint64_t>(p + kOffPayloadChecksum, h.payload_checksum);
  std::memcpy(p + kOffFingerprint, h.model_fingerprint.data(), h.model_fingerprint.size());
  store_le<uint64_t>(p + kOffHeaderChecksum, xxh3_64({p, kOffHeaderChecksum}));
  return out;
}

BlockHeader parse_block_header(std::span<const uint8_t> bytes, const std::string& file) {
  if (bytes.size() < kBlockHeaderSize)
    throw FormatError(file, "block header truncated: " + std::to_string(bytes.size()) + " of " +
                                std::to_string(kBlockHeaderSize) + " bytes");
  const uint8_t* p = bytes.data();
  if (std::memcmp(p, kMagic, sizeof kMagic) != 0)
    throw FormatError(file, "magic at offset 0 is not FDKVBLK");
  if (const auto v = load_le<uint32_t>(p + kOffVersion); v != kBlockFormatVersion)
    throw FormatError(file, "format version at offset 8 is " + std::to_string(v) +
                                ", this build reads version 1");
  if (load_le<uint32_t>(p + kOffHeaderSize) != kBlockHeaderSize)
    throw FormatError(file, "header size at offset 12 is not 256");
  if (load_le<uint64_t>(p + kOffHeaderChecksum) != xxh3_64({p, kOffHeaderChecksum}))
    throw FormatError(file, "header checksum at offset 248 does not match");
  const auto fp_len = load_le<uint32_t>(p + kOffFingerprintLen);
  if (fp_len > kMaxFingerprintBytes)
    throw FormatError(file, "fingerprint length at offset 52 is " + std::to_string(fp_len));
  BlockHeader h;
  h.key = load_key(p + kOffKey);
  if (BlockKey parent = load_key(p + kOffParent); !parent.is_zero()) h.parent = parent;
  h.token_count = load_le<uint32_t>(p + kOffTokens);
  h.model_fingerprint.assign(reinterpret_cast<const char*>(p + kOffFingerprint), fp_len);
  h.payload_size = load_le<uint64_t>(p + kOffPayloadSize);
  h.payload_checksum = load_le<uint64_t>(p + kOffPayloadChecksum);
  return h;
}

BlockHeader verify_block_file(std::span<const uint8_t> file_bytes, const BlockKey& expected_key,
                              std::string_view expected_fingerprint, const std::string& file) {
  const BlockHeader h = parse_block_header(file_bytes, file);
  if (h.key != expected_key)
    throw FormatError(file,
                      "key at offset 16 is " + h.key.hex() + ", expected " + expected_key.hex());
  if (h.model_fingerprint != expected_fingerprint)
    throw FormatError(file, "model fingerprint '" + h.model_fingerprint + "' is not '" +
                                std::string(expected_fingerprint) + "'");
  const uint64_t available = file_bytes.size() - kBlockHeaderSize;
  if (h.payload_size != available)
    throw FormatError(file, "payload length at offset 56 says " + std::to_string(h.payload_size) +
                                " bytes, the file holds " + std::to_string(available));
  if (xxh3_64(file_bytes.subspan(kBlockHeaderSize)) != h.payload_checksum)
    throw FormatError(file, "payload checksum (XXH3-64 at offset 64) does not match");
  return h;
}

std::filesystem::path block_file_path(const std::filesystem::path& kv_dir, const BlockKey& key) {
  const std::string hex = key.hex();
  return kv_dir / hex.substr(0, 2) / (hex + std::string(kBlockFileExtension));
}

std::optional<BlockKey> key_from_block_file_name(const std::filesystem::path& path) {
  if (path.extension() != kBlockFileExtension) return std::nullopt;
  return BlockKey::from_hex(path.stem().string());
}

}  // namespace flashdesk::storage
