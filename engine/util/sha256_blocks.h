// The SHA-256 block function in its two forms, behind Sha256 (which picks one per process): the
// portable one of FIPS 180-4 and one on the x86 SHA extensions (SHA-NI). Both update the state
// a..h with whole 64-byte blocks and give identical results (tested on random data).
#pragma once

#include <cstddef>
#include <cstdint>

namespace flashdesk {

void compress_blocks_portable(uint32_t* state, const uint8_t* blocks, size_t count);

// CPUID: SHA extensions plus the SSSE3 / SSE4.1 shuffles the block function uses.
bool cpu_has_sha_extensions();
// Call only when cpu_has_sha_extensions().
void compress_blocks_shani(uint32_t* state, const uint8_t* blocks, size_t count);

}  // namespace flashdesk
