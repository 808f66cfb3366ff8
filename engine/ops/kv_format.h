// Byte layouts of the V4.1 caches (docs/model-spec.md §6.2): one row per token or compressed entry,
// codes first, then the block scales, rows contiguous (FlashMLA's token-contiguous layout).
#pragma once

#include <cstddef>
#include <cstdint>

namespace flashdesk {

enum class KvFormat : uint8_t {
  Fp8Window,  // window ring: E4M3 codes [dim] + UE8M0 scales [dim/32] (528 B at dim 512)
  Fp4Entry,   // compressed main KV: packed E2M1 [dim/2] + E4M3 scales [dim/16] (288 B at 512)
  Fp4Key,     // index keys: packed E2M1 [dim/2] + UE8M0 scales [dim/32] (68 B at 128)
};

// Elements covered by one scale.
constexpr int64_t kv_block(KvFormat f) {
  return f == KvFormat::Fp4Entry ? 16 : 32;
}

constexpr int64_t kv_code_bytes(KvFormat f, int64_t dim) {
  return f == KvFormat::Fp8Window ? dim : dim / 2;
}

constexpr int64_t kv_row_bytes(KvFormat f, int64_t dim) {
  return kv_code_bytes(f, dim) + dim / kv_block(f);
}

static_assert(kv_row_bytes(KvFormat::Fp8Window, 512) == 528);
static_assert(kv_row_bytes(KvFormat::Fp4Entry, 512) == 288);
static_assert(kv_row_bytes(KvFormat::Fp4Key, 128) == 68);

}  // namespace flashdesk
