// A port of the part of numpy's random module (1.17+, unchanged through 2.x) that the official
// V4.1 code draws Engram's hash multipliers from: `np.random.default_rng(seed)` (SeedSequence ->
// PCG64) and `Generator.integers(low, high, size, dtype=np.int64)` (Lemire's bounded method,
// with the 32-bit draws buffered from 64-bit outputs as PCG64 does).
//
// Goals: numpy's exact values for a non-negative integer seed (checked against numpy itself,
// tests/data/numpy_random). Non-goals: other distributions, other dtypes, the masked method,
// array-valued bounds, seeds that are sequences or larger than 64 bits.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace flashdesk::numpy_random {

// SeedSequence(entropy).generate_state(4, np.uint64): the words PCG64 is seeded from.
std::array<uint64_t, 4> seed_sequence_state(uint64_t entropy);

// numpy's PCG64 bit generator (PCG XSL-RR 128/64), with its buffered 32-bit output.
class Pcg64 {
 public:
  // np.random.PCG64(seed): seeded through SeedSequence(seed).
  explicit Pcg64(uint64_t seed);

  uint64_t next64();
  // The low half of a 64-bit output, then its high half on the next call (numpy's next_uint32).
  uint32_t next32();

 private:
  unsigned __int128 state_ = 0;
  unsigned __int128 increment_ = 0;
  bool has_high_half_ = false;
  uint32_t high_half_ = 0;
};

// Generator.integers(low, high, size=count, dtype=np.int64) with the default endpoint=False:
// count values in [low, high). Requires low < high (numpy raises ValueError otherwise).
std::vector<int64_t> integers(Pcg64& generator, int64_t low, int64_t high, size_t count);

}  // namespace flashdesk::numpy_random
