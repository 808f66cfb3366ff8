// The on-disk format of one SSD KV block: a fixed 256-byte little-endian header (magic, format
// version, key, parent key, token count, model fingerprint, payload length, XXH3-64 of the payload,
// XXH3-64 of the header) followed by the engine's opaque payload. Layout: docs/kv-block-store.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "storage/kv_block_key.h"

namespace flashdesk::storage {

inline constexpr size_t kBlockHeaderSize = 256;
inline constexpr uint32_t kBlockFormatVersion = 1;
inline constexpr size_t kMaxFingerprintBytes = 128;
inline constexpr std::string_view kBlockFileExtension = ".kvb";

struct BlockHeader {
  BlockKey key;
  std::optional<BlockKey> parent;
  uint32_t token_count = 0;
  std::string model_fingerprint;
  uint64_t payload_size = 0;
  uint64_t payload_checksum = 0;  // XXH3-64 of the payload
};

// Header bytes for `header` (computes nothing: the caller sets the checksum).
std::vector<uint8_t> encode_block_header(const BlockHeader& header);

// Parses and checks the header (magic, version, sizes, header checksum). Throws FormatError
// naming `file` and the field.
BlockHeader parse_block_header(std::span<const uint8_t> bytes, const std::string& file);

// Checks a whole block file against what the index expects: header, key, fingerprint, token
// count, file size and payload checksum. The payload starts at kBlockHeaderSize. Throws
// FormatError.
BlockHeader verify_block_file(std::span<const uint8_t> file_bytes, const BlockKey& expected_key,
                              std::string_view expected_fingerprint, const std::string& file);

// <kv_dir>/<first two hex digits>/<32 hex digits>.kvb
std::filesystem::path block_file_path(const std::filesystem::path& kv_dir, const BlockKey& key);
// The key a block file's name spells, if it is one.
std::optional<BlockKey> key_from_block_file_name(const std::filesystem::path& path);

}  // namespace flashdesk::storage
