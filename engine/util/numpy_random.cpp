// numpy's SeedSequence, PCG64 and bounded int64 integers, following numpy/random/bit_generator.pyx,
// _pcg64.pyx, src/pcg64/pcg64.h and src/distributions/distributions.c.
#include "engine/util/numpy_random.h"

#include "engine/util/error.h"

namespace flashdesk::numpy_random {
namespace {

// SeedSequence's hash constants (bit_generator.pyx).
constexpr uint32_t kInitA = 0x43b0d7e5u;
constexpr uint32_t kMultA = 0x931e8875u;
constexpr uint32_t kInitB = 0x8b51f9ddu;
constexpr uint32_t kMultB = 0x58f38dedu;
constexpr uint32_t kMixMultL = 0xca01f9ddu;
constexpr uint32_t kMixMultR = 0x4973f715u;
constexpr int kXShift = 16;
constexpr size_t kPoolSize = 4;

uint32_t hashmix(uint32_t value, uint32_t& hash_const) {
  value ^= hash_const;
  hash_const *= kMultA;
  value *= hash_const;
  value ^= value >> kXShift;
  return value;
}

uint32_t mix(uint32_t x, uint32_t y) {
  uint32_t result = kMixMultL * x - kMixMultR * y;
  result ^= result >> kXShift;
  return result;
}

// _int_to_uint32_array: little-endian 32-bit words, [0] for zero.
std::vector<uint32_t> entropy_words(uint64_t entropy) {
  std::vector<uint32_t> words;
  do {
    words.push_back(static_cast<uint32_t>(entropy));
    entropy >>= 32;
  } while (entropy != 0);
  return words;
}

std::array<uint32_t, kPoolSize> mix_entropy(const std::vector<uint32_t>& entropy) {
  std::array<uint32_t, kPoolSize> pool{};
  uint32_t hash_const = kInitA;
  for (size_t i = 0; i < kPoolSize; ++i)
    pool[i] = hashmix(i < entropy.size() ? entropy[i] : 0u, hash_const);
  for (size_t src = 0; src < kPoolSize; ++src)
    for (size_t dst = 0; dst < kPoolSize; ++dst)
      if (src != dst) pool[dst] = mix(pool[dst], hashmix(pool[src], hash_const));
  for (size_t src = kPoolSize; src < entropy.size(); ++src)
    for (size_t dst = 0; dst < kPoolSize; ++dst)
      pool[dst] = mix(pool[dst], hashmix(entropy[src], hash_const));
  return pool;
}

using u128 = unsigned __int128;

// PCG_DEFAULT_MULTIPLIER_128.
constexpr u128 kPcgMultiplier = (u128{0x2360ed051fc65da4ull} << 64) | 0x4385df649fccf645ull;

uint64_t xsl_rr_output(u128 state) {
  const uint64_t folded = static_cast<uint64_t>(state >> 64) ^ static_cast<uint64_t>(state);
  const unsigned rot = static_cast<unsigned>(state >> 122);
  return (folded >> rot) | (folded << ((64u - rot) & 63u));
}

// Lemire's nearly divisionless method on 64-bit draws; `range` = high - low - 1 < 2^64 - 1.
uint64_t bounded_lemire64(Pcg64& g, uint64_t range) {
  const uint64_t range_excl = range + 1;
  u128 m = static_cast<u128>(g.next64()) * range_excl;
  uint64_t leftover = static_cast<uint64_t>(m);
  if (leftover < range_excl) {
    const uint64_t threshold = (UINT64_MAX - range) % range_excl;
    while (leftover < threshold) {
      m = static_cast<u128>(g.next64()) * range_excl;
      leftover = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

// The same on 32-bit draws, which numpy uses whenever the range fits 32 bits.
uint32_t bounded_lemire32(Pcg64& g, uint32_t range) {
  const uint32_t range_excl = range + 1;
  uint64_t m = static_cast<uint64_t>(g.next32()) * range_excl;
  uint32_t leftover = static_cast<uint32_t>(m);
  if (leftover < range_excl) {
    const uint32_t threshold = (UINT32_MAX - range) % range_excl;
    while (leftover < threshold) {
      m = static_cast<uint64_t>(g.next32()) * range_excl;
      leftover = static_cast<uint32_t>(m);
    }
  }
  return static_cast<uint32_t>(m >> 32);
}

// random_bounded_uint64_fill with use_masked = false: one value in [0, range].
uint64_t bounded(Pcg64& g, uint64_t range) {
  if (range == 0) return 0;
  if (range < UINT32_MAX) return bounded_lemire32(g, static_cast<uint32_t>(range));
  if (range == UINT32_MAX) return g.next32();
  if (range == UINT64_MAX) return g.next64();
  return bounded_lemire64(g, range);
}

}  // namespace

std::array<uint64_t, 4> seed_sequence_state(uint64_t entropy) {
  const std::array<uint32_t, kPoolSize> pool = mix_entropy(entropy_words(entropy));
  std::array<uint32_t, 8> words{};
  uint32_t hash_const = kInitB;
  for (size_t i = 0; i < words.size(); ++i) {
    uint32_t v = pool[i % kPoolSize];
    v ^= hash_const;
    hash_const *= kMultB;
    v *= hash_const;
    v ^= v >> kXShift;
    words[i] = v;
  }
  std::array<uint64_t, 4> out{};
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = words[2 * i] | (static_cast<uint64_t>(words[2 * i + 1]) << 32);
  return out;
}

Pcg64::Pcg64(uint64_t seed) {
  const std::array<uint64_t, 4> s = seed_sequence_state(seed);
  const u128 initstate = (static_cast<u128>(s[0]) << 64) | s[1];
  const u128 initseq = (static_cast<u128>(s[2]) << 64) | s[3];
  // pcg_setseq_128_srandom_r
  increment_ = (initseq << 1) | 1;
  state_ = 0;
  state_ = state_ * kPcgMultiplier + increment_;
  state_ += initstate;
  state_ = state_ * kPcgMultiplier + increment_;
}

uint64_t Pcg64::next64() {
  state_ = state_ * kPcgMultiplier + increment_;
  return xsl_rr_output(state_);
}

uint32_t Pcg64::next32() {
  if (has_high_half_) {
    has_high_half_ = false;
    return high_half_;
  }
  const uint64_t next = next64();
  has_high_half_ = true;
  high_half_ = static_cast<uint32_t>(next >> 32);
  return static_cast<uint32_t>(next);
}

std::vector<int64_t> integers(Pcg64& generator, int64_t low, int64_t high, size_t count) {
  FD_CHECK(low < high, "numpy integers: low >= high");
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low) - 1;
  std::vector<int64_t> out(count);
  for (int64_t& v : out)
    v = static_cast<int64_t>(static_cast<uint64_t>(low) + bounded(generator, range));
  return out;
}

}  // namespace flashdesk::numpy_random
