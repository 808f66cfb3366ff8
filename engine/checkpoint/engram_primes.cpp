// Miller-Rabin primality and the Engram prime draw.
#include "engine/checkpoint/engram_primes.h"

#include <array>

namespace flashdesk {
namespace {

uint64_t mul_mod(uint64_t a, uint64_t b, uint64_t m) {
  return static_cast<uint64_t>(static_cast<unsigned __int128>(a) * b % m);
}

uint64_t pow_mod(uint64_t base, uint64_t exp, uint64_t m) {
  uint64_t result = 1;
  base %= m;
  while (exp > 0) {
    if (exp & 1) result = mul_mod(result, base, m);
    base = mul_mod(base, base, m);
    exp >>= 1;
  }
  return result;
}

// These 12 witnesses decide primality for every n < 3.3e24, hence for all 64-bit n.
constexpr std::array<uint64_t, 12> kWitnesses = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37};

}  // namespace

bool is_prime(uint64_t n) {
  if (n < 2) return false;
  for (uint64_t p : kWitnesses)
    if (n % p == 0) return n == p;
  uint64_t d = n - 1;
  int s = 0;
  while ((d & 1) == 0) {
    d >>= 1;
    ++s;
  }
  for (uint64_t a : kWitnesses) {
    uint64_t x = pow_mod(a, d, n);
    if (x == 1 || x == n - 1) continue;
    bool composite = true;
    for (int r = 1; r < s && composite; ++r) {
      x = mul_mod(x, x, n);
      if (x == n - 1) composite = false;
    }
    if (composite) return false;
  }
  return true;
}

std::vector<std::vector<int64_t>> engram_primes(const TextConfig& text) {
  // The reference restarts each search at vocab_size - 1 but skips primes already used; as the
  // used ones are exactly the smallest primes found so far, the draw is the consecutive primes
  // from engram_vocab_size upwards.
  std::vector<std::vector<int64_t>> out;
  uint64_t candidate = static_cast<uint64_t>(text.engram_vocab_size);
  const int64_t per_layer = (text.engram_max_ngram_size - 1) * text.engram_n_heads;
  for (size_t layer = 0; layer < text.engram_layer_ids.size(); ++layer) {
    std::vector<int64_t> primes;
    primes.reserve(static_cast<size_t>(per_layer));
    for (int64_t i = 0; i < per_layer; ++i) {
      while (!is_prime(candidate)) ++candidate;
      primes.push_back(static_cast<int64_t>(candidate));
      ++candidate;
    }
    out.push_back(std::move(primes));
  }
  return out;
}

}  // namespace flashdesk
