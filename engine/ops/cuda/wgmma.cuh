// Hopper's warpgroup tensor-core product (wgmma.mma_async, sm_90a only): four consecutive warps
// (a warpgroup) issue one m64nNk16 product whose B (N x 16) tile the tensor cores read straight
// from shared memory through a 64-bit descriptor, and A (64 x 16) from the warpgroup's registers
// (or shared memory: a form not used here), into FP32 accumulators held in the warpgroup's
// registers. It runs asynchronously: the warps go on (decoding the next weight
// chunk) while the products run, and wait for a group of them later. mma.sync (mma.cuh), the
// products every other tensor-core kernel here uses, runs on Hopper at well under wgmma's rate.
//
// Operand layout (the one the descriptors below describe, "K-major with the 128-byte swizzle"):
// each row of a tile holds 64 BF16 values of k (128 bytes); 8 rows make a 1 KiB atom, atoms sit
// 1 KiB apart (the stride-dimension offset), and the 16-byte chunk c of row r is stored at chunk
// c ^ (r % 8) of that row (spreading a column of chunks over the banks). Tiles start on a 1 KiB
// boundary; the product over k 16 s .. 16 s + 15 takes the descriptor of the tile advanced by 32 s
// bytes, since the hardware applies the swizzle to the address bits (4-6 ^= 7-9) after adding.
//
// Accumulators of m64nNk16 (PTX ISA, "wgmma ... register fragment D"): warp w of the warpgroup
// and lane L hold, for each 8-column block j, d[4j + i] = D[16 w + L/4 + 8 (i / 2)][8 j + 2 (L % 4)
// + i % 2]: the mma.sync m16n8 layout repeated over the columns.
//
// The emulation (cuda-emu) computes a thread's accumulators at issue from B in shared memory as
// the descriptor and the swizzle above address it and A from its quad's registers (warp
// shuffles), sums in k order; the device's order differs only
// in FP32 rounding.
#pragma once

#include <cstdint>

#include "engine/ops/cuda/cuda_compat.cuh"

// Where this file's device code is real: the sm_90a pass of nvcc, or the emulation.
#if defined(FLASHDESK_CUDA_EMU) || (defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL))
#define FD_HAVE_WGMMA 1
#else
#define FD_HAVE_WGMMA 0
#endif

namespace flashdesk::cuda {

constexpr int kWgmmaRowBytes = 128;  // a swizzled row: 64 BF16 values of k
constexpr int kWgmmaAtomBytes = 8 * kWgmmaRowBytes;

// The byte offset of row r's 16-byte chunk c inside a swizzled tile.
__device__ __forceinline__ int swizzled_chunk(int r, int c) {
  return r * kWgmmaRowBytes + ((c ^ (r & 7)) << 4);
}

// The shared-memory address a descriptor names (the emulation: the offset into the block's
// dynamic shared memory, which is where every wgmma operand lives).
__device__ __forceinline__ uint32_t shared_address(const void* p) {
#ifdef FLASHDESK_CUDA_EMU
  return static_cast<uint32_t>(static_cast<const unsigned char*>(p) - fd_emu::dynamic_smem());
#else
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
#endif
}

// A K-major, 128-byte-swizzled tile's descriptor: start address / 16 in bits 0-13, the leading
// offset (unused by this layout, 1 by convention) in 16-29, the stride between 8-row atoms / 16 in
// 32-45, the swizzle mode (1: 128 bytes) in 62-63.
__device__ __forceinline__ uint64_t wgmma_descriptor(const void* tile) {
  const uint64_t start = (shared_address(tile) >> 4) & 0x3FFFu;
  return start | (uint64_t{1} << 16) | (uint64_t{kWgmmaAtomBytes >> 4} << 32) | (uint64_t{1} << 62);
}

// The same swizzled rows read as a transposed ("MN-major") B operand, for products whose B is
// stored k by k rather than n by n (attention's values: the keys' tile, slots by head dims, is B
// of P V with the slots as k): row r of the tile is k = r, its 64 values n = 0 .. 63 (a product
// of N <= 64 stays inside one row's 128 bytes, so the offset between 64-value column blocks is
// never used); the 8-row atoms lie 1 KiB apart along k, and the product over k 16 s .. 16 s + 15
// takes the descriptor of the tile advanced by 2 KiB s. Both offset fields say 1 KiB, which is
// right whichever of the two the hardware reads for the step along k.
__device__ __forceinline__ uint64_t wgmma_descriptor_transposed(const void* tile) {
  const uint64_t start = (shared_address(tile) >> 4) & 0x3FFFu;
  return start | (uint64_t{kWgmmaAtomBytes >> 4} << 16) | (uint64_t{kWgmmaAtomBytes >> 4} << 32) |
         (uint64_t{1} << 62);
}

#ifdef FLASHDESK_CUDA_EMU
namespace wgmma_emu {
// Element (row, c) of a swizzled BF16 tile named by a descriptor: k = c of row n = row for the
// K-major form, n = c of row k = row for the transposed one.
inline float element(uint64_t desc, int row, int k) {
  uint32_t addr = static_cast<uint32_t>(desc & 0x3FFFu) << 4;
  const uint32_t stride = static_cast<uint32_t>((desc >> 32) & 0x3FFFu) << 4;
  addr += static_cast<uint32_t>(row / 8) * stride + static_cast<uint32_t>(row % 8) * 128u +
          static_cast<uint32_t>(k) * 2u;
  addr ^= ((addr >> 7) & 7u) << 4;
  uint16_t bits;
  std::memcpy(&bits, fd_emu::dynamic_smem() + addr, 2);
  const uint32_t w = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &w, 4);
  return f;
}
}  // namespace wgmma_emu
#endif

// Orders this warpgroup's earlier register and shared-memory accesses before the products that
// follow (before the first product of a batch).
__device__ __forceinline__ void wgmma_fence() {
#if FD_HAVE_WGMMA && !defined(FLASHDESK_CUDA_EMU)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if FD_HAVE_WGMMA && !defined(FLASHDESK_CUDA_EMU)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Returns when all but the kPending most recent committed groups of products have finished.
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
#if FD_HAVE_WGMMA && !defined(FLASHDESK_CUDA_EMU)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#endif
}
// Shared memory written by ordinary stores (or cp.async) made visible to the tensor cores' reads:
// every writing thread, before the barrier that precedes the products.
__device__ __forceinline__ void fence_shared_for_async() {
#if FD_HAVE_WGMMA && !defined(FLASHDESK_CUDA_EMU)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// Keeps the compiler from moving or copying the accumulators across this point (around a batch of
// products): a register copy between a product's issue and its wait would read them while the
// tensor cores write them, and ptxas then serialises every product (its warning C7514).
template <int N>
__device__ __forceinline__ void wgmma_hold(float (&d)[N]) {
#if FD_HAVE_WGMMA && !defined(FLASHDESK_CUDA_EMU)
  FD_UNROLL
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
#else
  (void)d;
#endif
}

#if FD_HAVE_WGMMA && !defined(FLASHDESK_CUDA_EMU)
// The register-A product's inline assembly for one shape: accumulators DREGS ("%0, ..."), the
// operand PRED of the scale-d predicate's source (`scale_d`; 0: D = A B, fresh sums), A's
// registers and the descriptor AB, the operand TRANS of B's transposition (kTransB, an
// immediate); the accumulators d[] as the read-write operands (...).
#define FD_WGMMA_RS(SHAPE, DREGS, PRED, AB, TRANS, ...)                                           \
  asm volatile(                                                                                   \
      "{\n"                                                                                       \
      ".reg .pred p;\n"                                                                           \
      "setp.ne.b32 p, " PRED                                                                      \
      ", 0;\n"                                                                                    \
      "wgmma.mma_async.sync.aligned." SHAPE ".f32.bf16.bf16 {" DREGS "}, " AB ", p, 1, 1, " TRANS \
      ";\n"                                                                                       \
      "}\n"                                                                                       \
      : __VA_ARGS__                                                                               \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d),                    \
        "n"(kTransB ? 1 : 0))
#define FD_WGMMA_D4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define FD_WGMMA_D16(i) FD_WGMMA_D4(i), FD_WGMMA_D4(i + 4), FD_WGMMA_D4(i + 8), FD_WGMMA_D4(i + 12)
#define FD_WGMMA_REGS_0 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define FD_WGMMA_REGS_16 \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define FD_WGMMA_REGS_32 \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
#define FD_WGMMA_REGS_48 \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#endif

// The pair counts a product may take (wgmma's N): a tile's pairs rounded up to one of these, so
// that a tile of few pairs runs few products (moe_grouped_sm90a.cu).
template <int N>
constexpr bool kWgmmaRsWidth = N == 32 || N == 64 || N == 96 || N == 128;

// d += A (64 x 16) * B (N x 16, desc_b, so D is 64 x N), BF16 inputs, FP32 sums, with A from
// registers (the "RS" form; the moe kernel's decoded weights never pass through shared memory,
// moe_grouped_sm90a.cu says why): each warp w of the warpgroup gives rows
// 16 w .. 16 w + 15 in mma.sync m16n8k16's A layout (mma.cuh: with g = lane / 4 and c = 2 (lane
// % 4), a[0] = A[g][c, c+1], a[1] = A[g+8][c, c+1], a[2] = A[g][c+8, c+9], a[3] = A[g+8][c+8,
// c+9]). The registers must stay as they are until the product is awaited (wgmma_wait).
//
// kTransB: B is the transposed form (wgmma_descriptor_transposed). accumulate false: d = A B, the
// sums of this product alone (attention adds each product's sums itself, in FP32).
template <int N, bool kTransB = false>
__device__ __forceinline__ void wgmma_m64nNk16_bf16_rs(float (&d)[N / 2], const uint32_t (&a)[4],
                                                       uint64_t desc_b, bool accumulate = true) {
  static_assert(kWgmmaRsWidth<N>);
  static_assert(!kTransB || N <= 64, "a transposed B stays inside one 64-value row");
  const uint32_t scale_d = accumulate ? 1u : 0u;
#ifdef FLASHDESK_CUDA_EMU
  const fd_emu::ThreadContext& t = fd_emu::ctx();
  const int lane = static_cast<int>(t.lane), g = lane / 4;
  float rows[2][16];  // A rows g and g + 8 of this warp, from the four lanes of the quad
  for (int q = 0; q < 4; ++q)
    for (int r = 0; r < 4; ++r) {
      const auto v =
          static_cast<uint32_t>(fd_emu::warp_exchange(a[r], static_cast<unsigned>(4 * g + q)));
      const int k = 2 * q + (r >= 2 ? 8 : 0);
      uint32_t lo = (v & 0xFFFFu) << 16, hi = v & 0xFFFF0000u;
      std::memcpy(&rows[r & 1][k], &lo, 4);
      std::memcpy(&rows[r & 1][k + 1], &hi, 4);
    }
  for (int i = 0; i < N / 2; ++i) {
    const int col = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
    float acc = scale_d != 0 ? d[i] : 0.0f;
    for (int k = 0; k < 16; ++k)
      acc += rows[(i % 4) / 2][k] *
             (kTransB ? wgmma_emu::element(desc_b, k, col) : wgmma_emu::element(desc_b, col, k));
    d[i] = acc;
  }
#elif FD_HAVE_WGMMA
  // One instruction a width (its register list is part of it): the accumulators are operands
  // 0 .. N/2 - 1, then A's four registers, the descriptor, the scale-d predicate's source and the
  // B transposition.
  if constexpr (N == 32)
    FD_WGMMA_RS("m64n32k16", FD_WGMMA_REGS_0, "%21", "{%16, %17, %18, %19}, %20", "%22",
                FD_WGMMA_D16(0));
  else if constexpr (N == 64)
    FD_WGMMA_RS("m64n64k16", FD_WGMMA_REGS_0 ", " FD_WGMMA_REGS_16, "%37",
                "{%32, %33, %34, %35}, %36", "%38", FD_WGMMA_D16(0), FD_WGMMA_D16(16));
  else if constexpr (N == 96)
    FD_WGMMA_RS("m64n96k16", FD_WGMMA_REGS_0 ", " FD_WGMMA_REGS_16 ", " FD_WGMMA_REGS_32, "%53",
                "{%48, %49, %50, %51}, %52", "%54", FD_WGMMA_D16(0), FD_WGMMA_D16(16),
                FD_WGMMA_D16(32));
  else
    FD_WGMMA_RS("m64n128k16",
                FD_WGMMA_REGS_0 ", " FD_WGMMA_REGS_16 ", " FD_WGMMA_REGS_32 ", " FD_WGMMA_REGS_48,
                "%69", "{%64, %65, %66, %67}, %68", "%70", FD_WGMMA_D16(0), FD_WGMMA_D16(16),
                FD_WGMMA_D16(32), FD_WGMMA_D16(48));
#else
  (void)d, (void)a, (void)desc_b, (void)scale_d;
#endif
}

}  // namespace flashdesk::cuda
