// Cache rows on the CUDA backend: the three quantised row formats bit-identical to cpu-reference
// (codes and scales; edge magnitudes included), their dequantisation exact, and the compressor
// pooling within 1 BF16 ulp (exp may round differently) with the pending rows moved exactly, and
// the rows' norm, RoPE and quantisation in one kernel the three kernels' bits.
#include <bit>
#include <cmath>
#include <string>

#include "engine/ops/cuda/code_decode_probe.h"
#include "engine/ops/cuda/device_context.h"
#include "engine/util/numeric.h"
#include "tests/cuda/cuda_test_util.h"

namespace flashdesk::test {
namespace {

class CudaKvTest : public CudaOpTest {
 protected:
  // Random rows with blocks of special magnitudes: zeros, tiny values, ties of the FP4 grid,
  // values at the saturation edge.
  static std::vector<float> cache_rows(int64_t n, int64_t dim, uint32_t seed) {
    std::vector<float> v = random_bf16(static_cast<size_t>(n * dim), seed, 2.0f);
    for (int64_t j = 0; j < 16 && j < dim; ++j) v[static_cast<size_t>(j)] = 0.0f;
    if (n > 1) {
      for (int64_t j = 0; j < dim; ++j)
        v[static_cast<size_t>(dim + j)] = 0.25f * static_cast<float>((j % 25) - 12);  // FP4 ties
    }
    if (n > 2)
      for (int64_t j = 0; j < dim; ++j) v[static_cast<size_t>(2 * dim + j)] = 1e-7f * float(j);
    return v;
  }

  void check_format(KvFormat f, int64_t dim) {
    const int64_t n = 7, cap = 12, first = 3, rb = kv_row_bytes(f, dim);
    Pair x = both_f32(Shape{n, dim}, cache_rows(n, dim, static_cast<uint32_t>(dim)));
    Pair rows =
        both(DType::U8, Shape{cap, rb}, std::vector<uint8_t>(static_cast<size_t>(cap * rb), 0x5A));
    gpu().quantize_rows(f, x.gpu, rows.gpu, first);
    cpu().quantize_rows(f, x.cpu, rows.cpu, first);
    expect_identical(from_gpu<uint8_t>(rows.gpu), from_cpu<uint8_t>(rows.cpu), "quantized rows");
    Pair back = both_alloc(DType::F32, Shape{n, dim});
    gpu().dequantize_rows(f, rows.gpu, first, back.gpu);
    cpu().dequantize_rows(f, rows.cpu, first, back.cpu);
    expect_identical(from_gpu<float>(back.gpu), from_cpu<float>(back.cpu), "dequantized rows");
  }
};

TEST_F(CudaKvTest, WindowRowsAreBitIdentical) {
  check_format(KvFormat::Fp8Window, 64);
  check_format(KvFormat::Fp8Window, 512);
}

TEST_F(CudaKvTest, EntryRowsAreBitIdentical) {
  check_format(KvFormat::Fp4Entry, 64);
  check_format(KvFormat::Fp4Entry, 512);
}

TEST_F(CudaKvTest, IndexKeyRowsAreBitIdentical) {
  check_format(KvFormat::Fp4Key, 32);
  check_format(KvFormat::Fp4Key, 128);
}

TEST_F(CudaKvTest, CompressorPoolsGroupsAndKeepsTheTail) {
  const int64_t d = 48;
  for (int64_t ratio : {2, 4}) {
    Pair pkv = both_f32(Shape{ratio, d}, random_bf16(static_cast<size_t>(ratio * d), 11));
    Pair psc = both_f32(Shape{ratio, d}, random_bf16(static_cast<size_t>(ratio * d), 12));
    int64_t pend_g = 1, pend_c = 1;
    for (int64_t n : {1, 6, 3, 0, 9}) {
      Pair kv = both_f32(Shape{n, d}, random_bf16(static_cast<size_t>(n * d), 13 + uint32_t(n)));
      Pair sc =
          both_f32(Shape{n, d}, random_bf16(static_cast<size_t>(n * d), 14 + uint32_t(n), 3.0f));
      const int64_t groups = (pend_c + n) / ratio;
      Pair out = both_alloc(DType::F32, Shape{groups, d});
      gpu().compressor_pool(kv.gpu, sc.gpu, ratio, pkv.gpu, psc.gpu, pend_g, out.gpu);
      cpu().compressor_pool(kv.cpu, sc.cpu, ratio, pkv.cpu, psc.cpu, pend_c, out.cpu);
      ASSERT_EQ(pend_g, pend_c);
      expect_bf16_close(from_gpu<float>(out.gpu), from_cpu<float>(out.cpu), 1.0, 0.0, "pooled");
      const std::vector<float> pg = from_gpu<float>(pkv.gpu), pc = from_cpu<float>(pkv.cpu);
      const std::vector<float> sg = from_gpu<float>(psc.gpu), scc = from_cpu<float>(psc.cpu);
      const size_t live = static_cast<size_t>(pend_c * d);
      expect_identical(std::vector<float>(pg.begin(), pg.begin() + live),
                       std::vector<float>(pc.begin(), pc.begin() + live), "pending kv");
      expect_identical(std::vector<float>(sg.begin(), sg.begin() + live),
                       std::vector<float>(scc.begin(), scc.begin() + live), "pending score");
    }
  }
}

// rope_quantize_rows in one kernel (set_fused_cache_rows) gives the three kernels' bits, codes,
// scales and the rotated row alike: the window's key/value row (FP8, 512 values, normed), a
// compressed entry (FP4, 512, not normed) and its index key (FP4 keys, 128, normed), at one and
// three decode rows written from row 4 of the table, at positions with large angles.
TEST_F(CudaKvTest, CacheRowsInOneKernelGiveTheThreeKernelsBits) {
  struct Case {
    KvFormat format;
    int64_t dim;
    bool normed;
  };
  const Case cases[] = {{KvFormat::Fp8Window, 512, true},
                        {KvFormat::Fp4Entry, 512, false},
                        {KvFormat::Fp4Key, 128, true}};
  std::vector<float> inv_freq(32);
  for (size_t p = 0; p < inv_freq.size(); ++p)
    inv_freq[p] = static_cast<float>(std::pow(10000.0, -2.0 * double(p) / 64.0));
  const bool setting = gpu().fused_cache_rows();
  for (const Case& c : cases) {
    for (int64_t n : {1, 3}) {
      SCOPED_TRACE(std::to_string(int(c.format)) + " dim " + std::to_string(c.dim) + ", " +
                   std::to_string(n) + " rows");
      const int64_t cap = 12, first = 4, rb = kv_row_bytes(c.format, c.dim);
      const std::vector<float> x = cache_rows(n, c.dim, static_cast<uint32_t>(c.dim + n));
      const std::vector<float> w = random_bf16(static_cast<size_t>(c.dim), 77, 1.5f);
      std::vector<int64_t> positions;
      for (int64_t r = 0; r < n; ++r) positions.push_back(16383 + 997 * r);
      Tensor norm = gpu().alloc(DType::F32, Shape{c.dim});
      gpu().write(norm, w.data(), norm.nbytes());
      const std::vector<uint8_t> fill(static_cast<size_t>(cap * rb), 0x5A);
      auto run = [&](bool one_kernel, std::vector<float>& row_out) {
        gpu().set_fused_cache_rows(one_kernel);
        Tensor xt = gpu().alloc(DType::F32, Shape{n, c.dim});
        gpu().write(xt, x.data(), xt.nbytes());
        Tensor rows = gpu().alloc(DType::U8, Shape{cap, rb});
        gpu().write(rows, fill.data(), rows.nbytes());
        const uint64_t before = cuda::kernels_launched();
        gpu().rope_quantize_rows(xt, c.normed ? &norm : nullptr, 1e-6f, positions, inv_freq,
                                 c.format, rows, first);
        // One kernel, or the norm's, RoPE's and the quantisation's.
        EXPECT_EQ(cuda::kernels_launched() - before, one_kernel ? 1u : c.normed ? 3u : 2u);
        row_out = from_gpu<float>(xt);
        return from_gpu<uint8_t>(rows);
      };
      std::vector<float> x_three, x_one;
      const std::vector<uint8_t> three = run(false, x_three), one = run(true, x_one);
      expect_identical(one, three, "cache rows");
      expect_identical(x_one, x_three, "rotated rows");
    }
  }
  gpu().set_fused_cache_rows(setting);
}

// The branchless decoders the attention kernels stage keys with give every code's value bit for
// bit as the host's decoders (NaN codes included, their sign too).
TEST_F(CudaKvTest, FastCodeDecodersGiveEveryCodesValue) {
  const std::vector<float> got = decode_every_code(gpu());
  int differ = 0;
  for (uint32_t c = 0; c < 256; ++c)
    differ += std::bit_cast<uint32_t>(got[c]) != std::bit_cast<uint32_t>(e4m3_to_f32(uint8_t(c)));
  for (uint32_t c = 0; c < 16; ++c)
    differ +=
        std::bit_cast<uint32_t>(got[256 + c]) != std::bit_cast<uint32_t>(e2m1_to_f32(uint8_t(c)));
  EXPECT_EQ(differ, 0);
}

// The prefill attention's BF16 key decoders (bf16_codes.cuh): every E4M3 code at UE8M0 scales on
// both sides of the fast path's range (10..134) and every E2M1 code at every E4M3 scale, bit for
// bit the host's FP32 value rounded to BF16 (NaN as NaN). E4M3's subnormal codes go through a
// BF16 subnormal on the fast path: this holds it to the device's BF16 arithmetic.
TEST_F(CudaKvTest, KeyDecodersGiveEveryCodesBf16) {
  const std::vector<uint8_t> scales = {0,   1,   9,   10,  11,  60,  100, 117,
                                       120, 127, 130, 134, 135, 200, 254};
  const std::vector<uint16_t> got = decode_key_codes_bf16(gpu(), scales);
  const auto same = [](uint16_t g, float want) {
    const uint16_t w = f32_to_bf16(want);
    const bool g_nan = (g & 0x7FFFu) > 0x7F80u, w_nan = (w & 0x7FFFu) > 0x7F80u;
    return g_nan || w_nan ? g_nan == w_nan : g == w;
  };
  int differ = 0;
  for (size_t si = 0; si < scales.size(); ++si)
    for (uint32_t c = 0; c < 256; ++c)
      differ += !same(got[si * 256 + c], e4m3_to_f32(uint8_t(c)) * e8m0_to_f32(scales[si]));
  const size_t fp4 = scales.size() * 256;
  for (uint32_t e = 0; e < 256; ++e)
    for (uint32_t c = 0; c < 16; ++c)
      differ += !same(got[fp4 + e * 16 + c], e2m1_to_f32(uint8_t(c)) * e4m3_to_f32(uint8_t(e)));
  EXPECT_EQ(differ, 0);
}

}  // namespace
}  // namespace flashdesk::test
