// The optimised backend's ISA dispatch and its elementwise kernels, which must give the
// reference's bits exactly on every ISA: act_quant (FP8 codes and scales), cache-row decoding,
// BF16 rounding, RoPE, hc collapse / expand. Edge values: zeros of both signs, rounding ties,
// E4M3 subnormals, the 448 clamp, huge and tiny blocks, NaN.
#include <cstdlib>
#include <limits>
#include <vector>

#include "engine/ops/cpu/kernels.h"
#include "engine/util/quant.h"
#include "tests/engine/cpu_opt_test_util.h"

namespace flashdesk::test {
namespace {

// Bitwise equality (-0 != +0), except that any NaN equals any NaN.
void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want,
                      const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    if (!std::isnan(got[i]) || !std::isnan(want[i])) {
      EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
          << what << " element " << i << ": " << got[i] << " vs " << want[i];
    }
}

// Activation rows that exercise every branch of the quantiser.
std::vector<float> act_quant_inputs(Rng& rng) {
  std::vector<float> x;
  auto block = [&](auto gen) {
    for (int i = 0; i < 32; ++i) x.push_back(gen(i));
  };
  block([&](int) { return rng.symmetric(3.0f); });
  block([&](int) { return round_bf16(rng.symmetric(1.0f)); });
  block([&](int i) { return i == 0 ? 448.0f : rng.symmetric(0.02f); });  // E4M3 subnormals
  block([&](int i) { return i % 2 ? -0.0f : 0.0f; });                    // all zero: amax floor
  block([&](int i) { return 1e-6f * static_cast<float>(i - 16); });      // below the 1e-4 floor
  block([&](int i) { return 1e30f * rng.symmetric(1.0f) + static_cast<float>(i); });
  // Ties of the E4M3 grid at scale 1 (amax 448 -> scale 1): 1.0625 (between 1 and 1.125),
  // 0.0029296875 (between two subnormal steps), 17 (between 16 and 18), 440 (between 416 and 448).
  block([&](int i) {
    const float ties[] = {448.0f,        1.0625f, 1.1875f, 0.0029296875f,
                          0.0048828125f, 17.0f,   440.0f,  -19.0f};
    return ties[i % 8] * (i % 3 == 2 ? -1.0f : 1.0f);
  });
  block([&](int i) { return 0x1p-6f * (1.0f + static_cast<float>(i) / 64.0f); });  // normal edge
  block([&](int i) {
    return i == 3 ? std::numeric_limits<float>::quiet_NaN() : rng.symmetric(2.0f);
  });
  return x;
}

using CpuOptKernelsTest = OptTest;

TEST_P(CpuOptKernelsTest, ActQuantGivesTheReferenceBits) {
  const cpu_opt::Kernels& k = opt().kernels();
  Rng rng(3);
  for (int64_t len : {256, 37, 70, 5}) {  // whole blocks, a partial trailing block, less than one
    std::vector<float> x = act_quant_inputs(rng);
    x.resize(static_cast<size_t>(len));
    std::vector<float> want = x, got(x.size()), in_place = x;
    fake_quant_fp8(want.data(), want.size(), 32);
    k.act_quant_row(x.data(), len, got.data());
    k.act_quant_row(in_place.data(), len, in_place.data());
    expect_same_bits(got, want, "act_quant");
    expect_same_bits(in_place, want, "act_quant in place");
  }
}

TEST_P(CpuOptKernelsTest, CacheRowsDecodeToTheReferenceValues) {
  const cpu_opt::Kernels& k = opt().kernels();
  Rng rng(5);
  for (KvFormat f : {KvFormat::Fp8Window, KvFormat::Fp4Entry, KvFormat::Fp4Key})
    for (int64_t dim : {32, 128, 512, 48}) {
      if (dim % kv_block(f) != 0) continue;
      const auto x = rng.bf16s(static_cast<size_t>(dim), 4.0f);
      std::vector<uint8_t> row(static_cast<size_t>(kv_row_bytes(f, dim)));
      cpu::quantize_kv_row(f, x.data(), dim, row.data());
      std::vector<float> want(static_cast<size_t>(dim)), got(static_cast<size_t>(dim));
      cpu::dequantize_kv_row(f, row.data(), dim, want.data());
      k.dequantize_kv_row(f, row.data(), dim, got.data());
      for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << int(f) << " " << dim;
    }
}

TEST_P(CpuOptKernelsTest, Bf16RoundingGivesTheReferenceBits) {
  std::vector<float> x = {1.0f + 0x1p-8f,
                          1.0f + 0x1p-8f + 0x1p-23f,
                          1.0f + 3 * 0x1p-8f,
                          -0.0f,
                          std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(),
                          3.4e38f,
                          1e-40f,
                          -2.5f};
  Rng rng(9);
  for (int i = 0; i < 100; ++i) x.push_back(rng.symmetric(100.0f));
  std::vector<float> want = x;
  for (auto& v : want) v = round_bf16(v);
  opt().kernels().round_bf16(x.data(), static_cast<int64_t>(x.size()));
  expect_same_bits(x, want, "round_bf16");
}

TEST_P(CpuOptKernelsTest, RopeAndHcRowsGiveTheReferenceBits) {
  Rng rng(11);
  for (int64_t pairs : {32, 5}) {  // whole vectors and a scalar tail
    for (bool inverse : {false, true}) {
      const int64_t n = 3, heads = 2, head_dim = 2 * pairs + 6;
      const auto x = rng.bf16s(static_cast<size_t>(n * heads * head_dim), 2.0f);
      std::vector<float> inv_freq(static_cast<size_t>(pairs));
      for (int64_t p = 0; p < pairs; ++p)
        inv_freq[p] = std::pow(10000.0f, -2.0f * static_cast<float>(p) / (2 * pairs));
      const std::vector<int64_t> pos = {0, 7, 100000};
      Tensor a = f32(Shape{n, heads, head_dim}, x), b = f32(Shape{n, heads, head_dim}, x);
      ref().rope(a, head_dim, pos, inv_freq, inverse);
      opt().rope(b, head_dim, pos, inv_freq, inverse);
      expect_same_bits(host<float>(b), host<float>(a), "rope");
    }
  }
  for (int64_t d : {64, 37}) {
    const int64_t n = 2, hc = 4;
    Tensor X = f32(Shape{n, hc, d}, rng.bf16s(static_cast<size_t>(n * hc * d), 2.0f));
    // The mixes are FP32 values (not BF16), so their products round: a fused multiply-add would
    // show.
    Tensor pre = f32(Shape{n, hc}, rng.floats(static_cast<size_t>(n * hc), 1.0f));
    Tensor post = f32(Shape{n, hc}, rng.floats(static_cast<size_t>(n * hc), 2.0f));
    Tensor comb = f32(Shape{n, hc, hc}, rng.floats(static_cast<size_t>(n * hc * hc), 1.0f));
    Tensor y = f32(Shape{n, d}, rng.bf16s(static_cast<size_t>(n * d), 2.0f));
    Tensor u_ref = ref().alloc(DType::F32, Shape{n, d}),
           u_opt = ref().alloc(DType::F32, Shape{n, d});
    ref().hc_collapse(X, pre, u_ref);
    opt().hc_collapse(X, pre, u_opt);
    expect_same_bits(host<float>(u_opt), host<float>(u_ref), "hc_collapse");
    Tensor o_ref = ref().alloc(DType::F32, Shape{n, hc, d}),
           o_opt = ref().alloc(DType::F32, Shape{n, hc, d});
    ref().hc_expand(X, y, post, comb, o_ref);
    opt().hc_expand(X, y, post, comb, o_opt);
    expect_same_bits(host<float>(o_opt), host<float>(o_ref), "hc_expand");
  }
}

TEST_P(CpuOptKernelsTest, MultiplyThenAddIsNotFused) {
  // a * b = 4 + 2^-9 + 2^-10 + 2^-11 + 2^-21 + 2^-23 rounds (FP32) to p without the 2^-23, and
  // p + c = 1 + 2^-8 exactly: a BF16 tie, which rounds to 1. A fused multiply-add keeps the
  // 2^-23 and rounds the BF16 up to 1 + 2^-7 instead.
  const float a = 1.0f + 0x1p-12f, b = 4.0f + 0x1p-9f + 0x1p-11f;
  const float c = -3.0f + 0x1p-8f - 0x1p-9f - 0x1p-10f - 0x1p-11f - 0x1p-21f;
  ASSERT_EQ(a * b + c, 1.0f + 0x1p-8f);  // (this file is built without FMA contraction)
  // hc_collapse: u = bf16(1 * c + a * b).
  std::vector<float> x(2 * 8), pre = {1.0f, a};
  for (int e = 0; e < 8; ++e) {
    x[e] = c;
    x[8 + e] = b;
  }
  std::vector<float> u(8);
  opt().kernels().hc_collapse_row(x.data(), pre.data(), 2, 8, u.data());
  for (float v : u) EXPECT_EQ(v, 1.0f) << "hc_collapse";
  // hc_expand: out_0 = bf16(post_0 * y + sum_j comb[j][0] * x_j) = bf16(a * b + c).
  std::vector<float> y(8, b), post = {a, a}, comb = {1.0f, 0.0f, 0.0f, 0.0f}, out(2 * 8);
  std::vector<float> xs(2 * 8, 0.0f);
  for (int e = 0; e < 8; ++e) xs[e] = c;
  opt().kernels().hc_expand_row(xs.data(), y.data(), post.data(), comb.data(), 2, 8, out.data());
  for (int e = 0; e < 8; ++e) EXPECT_EQ(out[e], 1.0f) << "hc_expand";
  // The indexer's head sum (FP32 output): every multiply and add rounds as in the reference.
  Rng rng(13);
  const int64_t heads = 5, m = 37;
  const auto dots = rng.floats(static_cast<size_t>(heads * m), 3.0f);
  const auto w = rng.floats(static_cast<size_t>(heads), 1.0f);
  std::vector<float> want(static_cast<size_t>(m)), got(static_cast<size_t>(m));
  cpu_opt::scalar_kernels().relu_weighted_sum(dots.data(), m, w.data(), heads, m, want.data());
  opt().kernels().relu_weighted_sum(dots.data(), m, w.data(), heads, m, got.data());
  expect_same_bits(got, want, "relu_weighted_sum");
}

FD_OPT_TEST_SUITE(CpuOptKernelsTest);

TEST(CpuIsaTest, NamesRoundTripAndScalarIsAlwaysSupported) {
  for (CpuIsa isa : {CpuIsa::Scalar, CpuIsa::Avx2, CpuIsa::Avx512})
    EXPECT_EQ(parse_cpu_isa(cpu_isa_name(isa)), isa);
  EXPECT_FALSE(parse_cpu_isa("avx512f").has_value());
  EXPECT_FALSE(parse_cpu_isa("AVX2").has_value());
  ASSERT_FALSE(supported_cpu_isas().empty());
  EXPECT_EQ(supported_cpu_isas().front(), CpuIsa::Scalar);
}

// Sets FLASHDESK_CPU_ISA for one scope and restores the previous value.
class ScopedIsaEnv {
 public:
  explicit ScopedIsaEnv(const char* value) {
    if (const char* old = std::getenv("FLASHDESK_CPU_ISA")) old_ = old;
    setenv("FLASHDESK_CPU_ISA", value, 1);
  }
  ~ScopedIsaEnv() {
    if (old_.empty())
      unsetenv("FLASHDESK_CPU_ISA");
    else
      setenv("FLASHDESK_CPU_ISA", old_.c_str(), 1);
  }

 private:
  std::string old_;
};

TEST(CpuIsaTest, EnvironmentForcesTheKernelSetAndRejectsUnknownOrUnsupportedOnes) {
  {
    ScopedIsaEnv env("scalar");
    EXPECT_EQ(choose_cpu_isa(), CpuIsa::Scalar);
    EXPECT_EQ(CpuOptimizedBackend(1).isa(), CpuIsa::Scalar);
    EXPECT_EQ(CpuOptimizedBackend(1).name(), "cpu-optimized-scalar");
  }
  {
    ScopedIsaEnv env("sse4");
    EXPECT_THROW(choose_cpu_isa(), InvalidRequest);
  }
  {
    ScopedIsaEnv env("avx512");
    if (cpu_isa_supported(CpuIsa::Avx512))
      EXPECT_EQ(CpuOptimizedBackend(1).isa(), CpuIsa::Avx512);
    else
      EXPECT_THROW(CpuOptimizedBackend(1), InvalidRequest);
  }
  {
    ScopedIsaEnv env("avx2");
    if (cpu_isa_supported(CpuIsa::Avx2))
      EXPECT_EQ(CpuOptimizedBackend(1).isa(), CpuIsa::Avx2);
    else
      EXPECT_THROW(CpuOptimizedBackend(1), InvalidRequest);
  }
  {
    ScopedIsaEnv env("");
    EXPECT_EQ(choose_cpu_isa(), supported_cpu_isas().back());
  }
}

}  // namespace
}  // namespace flashdesk::test
