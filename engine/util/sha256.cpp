// SHA-256 compression function and padding, written from FIPS 180-4; whole blocks go to the SHA
// extensions when the CPU has them (sha256_shani.cpp).
#include "engine/util/sha256.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "engine/util/sha256_blocks.h"

namespace flashdesk {
namespace {

constexpr std::array<uint32_t, 8> kInitial = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                              0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

uint32_t load_be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

void compress_one(uint32_t* state, const uint8_t* block) {
  std::array<uint32_t, 64> w;
  for (int i = 0; i < 16; ++i) w[i] = load_be32(block + 4 * i);
  for (int i = 16; i < 64; ++i) {
    const uint32_t s0 = std::rotr(w[i - 15], 7) ^ std::rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const uint32_t s1 = std::rotr(w[i - 2], 17) ^ std::rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = state[0], b = state[1], c = state[2], d = state[3], e = state[4], f = state[5],
           g = state[6], h = state[7];
  for (int i = 0; i < 64; ++i) {
    const uint32_t t1 = h + (std::rotr(e, 6) ^ std::rotr(e, 11) ^ std::rotr(e, 25)) +
                        ((e & f) ^ (~e & g)) + kSha256Round[static_cast<size_t>(i)] + w[i];
    const uint32_t t2 =
        (std::rotr(a, 2) ^ std::rotr(a, 13) ^ std::rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  const std::array<uint32_t, 8> add = {a, b, c, d, e, f, g, h};
  for (int i = 0; i < 8; ++i) state[i] += add[i];
}

}  // namespace

void compress_blocks_portable(uint32_t* state, const uint8_t* blocks, size_t count) {
  for (size_t i = 0; i < count; ++i) compress_one(state, blocks + 64 * i);
}

namespace {

// Decided once per process (the CPU does not change under it), on first use.
bool use_sha_extensions() {
  static const bool use = cpu_has_sha_extensions();
  return use;
}

}  // namespace

Sha256::Sha256() : state_(kInitial) {}

bool Sha256::hardware_accelerated() {
  return use_sha_extensions();
}

void Sha256::compress_blocks(const uint8_t* blocks, size_t count) {
  if (use_sha_extensions())
    compress_blocks_shani(state_.data(), blocks, count);
  else
    compress_blocks_portable(state_.data(), blocks, count);
}

void Sha256::update(std::span<const uint8_t> bytes) {
  total_bytes_ += bytes.size();
  size_t pos = 0;
  if (buffered_ > 0) {
    const size_t take = std::min(bytes.size(), 64 - buffered_);
    std::memcpy(buffer_.data() + buffered_, bytes.data(), take);
    buffered_ += take;
    pos = take;
    if (buffered_ < 64) return;
    compress_blocks(buffer_.data(), 1);
    buffered_ = 0;
  }
  const size_t whole = (bytes.size() - pos) / 64;
  compress_blocks(bytes.data() + pos, whole);
  pos += 64 * whole;
  buffered_ = bytes.size() - pos;
  if (buffered_ > 0) std::memcpy(buffer_.data(), bytes.data() + pos, buffered_);
}

void Sha256::update(std::string_view text) {
  update({reinterpret_cast<const uint8_t*>(text.data()), text.size()});
}

void Sha256::update_u64(uint64_t v) {
  std::array<uint8_t, 8> le;
  for (int i = 0; i < 8; ++i) le[i] = static_cast<uint8_t>(v >> (8 * i));
  update(le);
}

Sha256::Digest Sha256::finish() {
  const uint64_t bit_length = total_bytes_ * 8;
  const uint8_t pad_start = 0x80;
  update({&pad_start, 1});
  const uint8_t zero = 0;
  while (buffered_ != 56) update({&zero, 1});
  std::array<uint8_t, 8> be;
  for (int i = 0; i < 8; ++i) be[i] = static_cast<uint8_t>(bit_length >> (56 - 8 * i));
  update(be);
  Digest out;
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j) out[4 * i + j] = static_cast<uint8_t>(state_[i] >> (24 - 8 * j));
  return out;
}

std::string Sha256::hex(const Digest& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  s.reserve(64);
  for (uint8_t b : digest) {
    s.push_back(kHex[b >> 4]);
    s.push_back(kHex[b & 0xF]);
  }
  return s;
}

}  // namespace flashdesk
