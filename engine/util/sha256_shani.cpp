// The SHA-256 block function on the x86 SHA extensions. The state is kept as the two halves the
// instructions want (ABEF and CDGH); each SHA256RNDS2 does two rounds, and SHA256MSG1/MSG2 build
// the message schedule four words at a time (W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15]) + W[t-16]).
// Only this function is compiled for the extensions (a target attribute, not a file-wide flag),
// so no inline function of a shared header can leak SHA code into the baseline build.
#include "engine/util/sha256_blocks.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define FLASHDESK_SHA_X86 1
#endif

namespace flashdesk {

#ifdef FLASHDESK_SHA_X86

bool cpu_has_sha_extensions() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const bool ssse3 = (c & bit_SSSE3) != 0, sse41 = (c & bit_SSE4_1) != 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return ssse3 && sse41 && (b & bit_SHA) != 0;
}

__attribute__((target("sha,ssse3,sse4.1"))) void compress_blocks_shani(uint32_t* state,
                                                                       const uint8_t* blocks,
                                                                       size_t count) {
  // Big-endian message words from little-endian loads.
  const __m128i byte_swap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  __m128i dcba = _mm_loadu_si128(reinterpret_cast<const __m128i*>(state));
  __m128i hgfe = _mm_loadu_si128(reinterpret_cast<const __m128i*>(state + 4));
  dcba = _mm_shuffle_epi32(dcba, 0xB1);              // CDAB
  hgfe = _mm_shuffle_epi32(hgfe, 0x1B);              // EFGH
  __m128i abef = _mm_alignr_epi8(dcba, hgfe, 8);     // ABEF
  __m128i cdgh = _mm_blend_epi16(hgfe, dcba, 0xF0);  // CDGH
  for (size_t n = 0; n < count; ++n, blocks += 64) {
    const __m128i abef_in = abef, cdgh_in = cdgh;
    __m128i w[4];  // the last 16 schedule words, four per register, oldest first
    for (int i = 0; i < 4; ++i)
      w[i] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks + 16 * i)),
                              byte_swap);
    for (int i = 0; i < 16; ++i) {
      __m128i& x = w[i & 3];
      if (i >= 4) {
        // x holds W[4i-16 .. 4i-13]; w[(i-1)&3] the newest four, w[(i-2)&3] the four before.
        const __m128i t = _mm_add_epi32(_mm_sha256msg1_epu32(x, w[(i - 3) & 3]),
                                        _mm_alignr_epi8(w[(i - 1) & 3], w[(i - 2) & 3], 4));
        x = _mm_sha256msg2_epu32(t, w[(i - 1) & 3]);
      }
      __m128i k = _mm_add_epi32(
          x, _mm_loadu_si128(reinterpret_cast<const __m128i*>(kSha256Round.data() + 4 * i)));
      cdgh = _mm_sha256rnds2_epu32(cdgh, abef, k);
      k = _mm_shuffle_epi32(k, 0x0E);
      abef = _mm_sha256rnds2_epu32(abef, cdgh, k);
    }
    abef = _mm_add_epi32(abef, abef_in);
    cdgh = _mm_add_epi32(cdgh, cdgh_in);
  }
  const __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
  const __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state), _mm_blend_epi16(feba, dchg, 0xF0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state + 4), _mm_alignr_epi8(dchg, feba, 8));
}

#else  // not x86: the portable compression always runs

bool cpu_has_sha_extensions() {
  return false;
}

void compress_blocks_shani(uint32_t*, const uint8_t*, size_t) {}

#endif

}  // namespace flashdesk
