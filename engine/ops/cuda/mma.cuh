// The warp-wide tensor-core product the prefill kernels use: mma.sync m16n8k16 with BF16 inputs
// and FP32 accumulation (sm_80 and newer: every architecture the backend compiles for). On the
// CPU emulation (`cuda-emu`) the same fragments go through fd_emu::mma_bf16_16816, so the
// kernels' indexing is tested without a GPU.
//
// Fragments (PTX ISA, "mma.m16n8k16" for .bf16), with g = lane / 4 and c = 2 * (lane % 4); each
// 32-bit register holds two BF16 values, the lower index in the low half:
//   A (16 x 16, row major): a[0] = A[g][c, c+1], a[1] = A[g+8][c, c+1], a[2] = A[g][c+8, c+9],
//                           a[3] = A[g+8][c+8, c+9]
//   B (16 x 8, k by n):     b[0] = B[c, c+1][g],  b[1] = B[c+8, c+9][g]
//   D (16 x 8, FP32):       d[0], d[1] = D[g][c, c+1],  d[2], d[3] = D[g+8][c, c+1]
// BF16 products are exact in FP32, so a product's value is the definition's; only the order (and,
// on the device, the tensor core's internal rounding) of the FP32 sums differs.
#pragma once

#include <cstdint>

#include "engine/ops/cuda/cuda_compat.cuh"

namespace flashdesk::cuda {

// d += A * B for one 16 x 8 tile (every lane of the warp calls it with its fragments).
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4],
                                               const uint32_t (&b)[2]) {
#ifdef FLASHDESK_CUDA_EMU
  fd_emu::mma_bf16_16816(d, a, b);
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// The same with FP16 inputs (the fragments' layout is the BF16 one). FP16 products of E2M1 or
// E4M3 values with E4M3 values are exact in FP32.
__device__ __forceinline__ void mma_f16_16816(float (&d)[4], const uint32_t (&a)[4],
                                              const uint32_t (&b)[2]) {
#ifdef FLASHDESK_CUDA_EMU
  fd_emu::mma_f16_16816(d, a, b);
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

#ifdef FLASHDESK_CUDA_EMU
// ldmatrix on the emulation: register j of a lane from the rows the lanes of matrix j gave; the
// transposed form takes a column of two rows.
template <int kMatrices, bool kTrans>
__device__ __forceinline__ void ldmatrix_emu(uint32_t* r, const void* row) {
  const unsigned lane = fd_emu::ctx().lane;
  const auto address = reinterpret_cast<uintptr_t>(row);
  for (unsigned j = 0; j < kMatrices; ++j) {
    if constexpr (kTrans) {
      const uint64_t lo = fd_emu::warp_exchange(address, 8 * j + 2 * (lane % 4));
      const uint64_t hi = fd_emu::warp_exchange(address, 8 * j + 2 * (lane % 4) + 1);
      const uint16_t a = reinterpret_cast<const uint16_t*>(static_cast<uintptr_t>(lo))[lane / 4];
      const uint16_t b = reinterpret_cast<const uint16_t*>(static_cast<uintptr_t>(hi))[lane / 4];
      r[j] = static_cast<uint32_t>(a) | (static_cast<uint32_t>(b) << 16);
    } else {
      const uint64_t from = fd_emu::warp_exchange(address, 8 * j + lane / 4);
      r[j] = reinterpret_cast<const uint32_t*>(static_cast<uintptr_t>(from))[lane % 4];
    }
  }
}
#endif

// Four 8 x 8 matrices of 16-bit values from shared memory (ldmatrix.x4): lane l gives the address
// of row l % 8 of matrix l / 8 (16 bytes, 16-byte aligned); r[j] gets the two values at row l / 4,
// columns 2 (l % 4) and 2 (l % 4) + 1 of matrix j, which is an mma fragment register's layout.
// Every lane of the warp calls it.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
#ifdef FLASHDESK_CUDA_EMU
  ldmatrix_emu<4, false>(r, row);
#else
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
#endif
}

// Two 8 x 8 matrices (ldmatrix.x2): lanes 0-15 give the row addresses, as for ldmatrix_x4 (lanes
// 16-31's addresses are ignored but must be valid shared addresses).
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const void* row) {
#ifdef FLASHDESK_CUDA_EMU
  ldmatrix_emu<2, false>(r, row);
#else
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(s));
#endif
}

// The transposed forms (.trans): r[j] gets the values at rows 2 (l % 4) and 2 (l % 4) + 1 of
// column l / 4 of matrix j (the lower row in the low half): a B fragment of a k-by-n operand
// stored n-minor (row = k), as the attention's values are (rows = slots, columns = dims).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
#ifdef FLASHDESK_CUDA_EMU
  ldmatrix_emu<4, true>(r, row);
#else
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
#endif
}
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&r)[2], const void* row) {
#ifdef FLASHDESK_CUDA_EMU
  ldmatrix_emu<2, true>(r, row);
#else
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(s));
#endif
}

// Two BF16 values (bit patterns) as one fragment register, `lo` at the lower index.
__device__ __forceinline__ uint32_t pack_bf16_pair(uint16_t lo, uint16_t hi) {
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

}  // namespace flashdesk::cuda
