// Linear layers of the CUDA backend (GEMV path up to 8 rows, cuBLAS path beyond) on random
// weights in every stored format. Quantised linears are checked against a scalar host model of
// docs/numerics.md's definition (per 32-column block: the sum of code products, scaled by the
// activation's and the weight's block scales, accumulated block by block) and against
// cpu-reference; BF16 / F32 / grouped linears against cpu-reference. Tolerance: 1 BF16 ulp of
// the result plus 2^-20 of the sum of |products| (FP32 sums in another order).
#include "engine/util/quant.h"
#include "tests/cuda/cuda_test_util.h"

namespace flashdesk::test {
namespace {

struct HostWeight {
  WeightFormat format;
  int64_t out, in;
  std::vector<uint8_t> data, scale;  // codes (FP8 / packed FP4) or BF16 / F32 bytes
};

HostWeight random_weight(WeightFormat f, int64_t out, int64_t in, uint32_t seed) {
  HostWeight w{f, out, in, {}, {}};
  switch (f) {
    case WeightFormat::Fp8Block:
      w.data = random_e4m3(static_cast<size_t>(out * in), seed);
      w.scale = random_e8m0(static_cast<size_t>((out + 31) / 32 * ((in + 31) / 32)), seed + 1, -9);
      break;
    case WeightFormat::Fp4Row:
      w.data = random_bytes(static_cast<size_t>(out * in / 2), seed);
      w.scale = random_e8m0(static_cast<size_t>(out * in / 32), seed + 1, -3);
      break;
    case WeightFormat::Bf16: {
      const std::vector<float> v = random_bf16(static_cast<size_t>(out * in), seed, 0.05f);
      w.data.resize(v.size() * 2);
      for (size_t i = 0; i < v.size(); ++i) {
        const uint16_t h = f32_to_bf16(v[i]);
        std::memcpy(&w.data[2 * i], &h, 2);
      }
      break;
    }
    case WeightFormat::F32: {
      const std::vector<float> v = random_uniform(static_cast<size_t>(out * in), seed, -0.1f, 0.1f);
      w.data.resize(v.size() * 4);
      std::memcpy(w.data.data(), v.data(), w.data.size());
      break;
    }
  }
  return w;
}

// The weight as the checkpoint stores it, uploaded to `be` through upload_linear.
LinearWeight upload(Backend& be, const HostWeight& h) {
  static const DType dtypes[] = {DType::F8_E4M3, DType::I8, DType::BF16, DType::F32};
  const DType dt = dtypes[static_cast<int>(h.format)];
  const int64_t cols = h.format == WeightFormat::Fp4Row ? h.in / 2 : h.in;
  const std::array<int64_t, 2> ws = {h.out, cols};
  TensorView w{"test.weight", dt, ws, h.data.data(), h.data.size()};
  if (h.scale.empty()) return be.upload_linear(w, nullptr);
  const std::array<int64_t, 2> ss = {h.format == WeightFormat::Fp8Block ? (h.out + 31) / 32 : h.out,
                                     (h.in + 31) / 32};
  TensorView s{"test.scale", DType::F8_E8M0, ss, h.scale.data(), h.scale.size()};
  return be.upload_linear(w, &s);
}

// The same weight on `be` with its bytes starting `offset` bytes past an allocation's start (a
// 16-byte boundary): every row misaligned for the kernels' 16-byte loads when offset % 16 != 0.
LinearWeight weight_at(Backend& be, const HostWeight& h, size_t offset) {
  LinearWeight w = upload(be, h);
  std::vector<uint8_t> bytes(offset + h.data.size());
  std::memcpy(bytes.data() + offset, h.data.data(), h.data.size());
  Tensor buf = be.alloc(DType::U8, Shape{static_cast<int64_t>(bytes.size())});
  be.write(buf, bytes.data(), bytes.size());
  w.data = Tensor(buf.memory(), buf.byte_offset() + offset, w.data.dtype(), w.data.shape());
  return w;
}

// F32 rows [shape] on `be` starting `offset` bytes into an allocation.
Tensor f32_at(Backend& be, Shape shape, const std::vector<float>& v, size_t offset) {
  std::vector<uint8_t> bytes(offset + v.size() * 4);
  std::memcpy(bytes.data() + offset, v.data(), v.size() * 4);
  Tensor buf = be.alloc(DType::U8, Shape{static_cast<int64_t>(bytes.size())});
  be.write(buf, bytes.data(), bytes.size());
  return Tensor(buf.memory(), buf.byte_offset() + offset, DType::F32, shape);
}

// Weight value without / with its block scale.
float code_value(const HostWeight& w, int64_t o, int64_t c) {
  if (w.format == WeightFormat::Fp8Block)
    return e4m3_to_f32(w.data[static_cast<size_t>(o * w.in + c)]);
  const uint8_t byte = w.data[static_cast<size_t>(o * (w.in / 2) + c / 2)];
  return e2m1_to_f32((c & 1) ? e2m1_high(byte) : e2m1_low(byte));
}
float weight_scale(const HostWeight& w, int64_t o, int64_t b) {
  const int64_t cols = (w.in + 31) / 32;
  return e8m0_to_f32(
      w.scale[static_cast<size_t>((w.format == WeightFormat::Fp8Block ? o / 32 : o) * cols + b)]);
}

// docs/numerics.md "Linear layers" for quantised weights, scalar: returns y and sum |products|.
void reference_by_blocks(const std::vector<float>& x, int64_t n, const HostWeight& w,
                         std::vector<float>& y, std::vector<float>& terms) {
  const int64_t k = w.in, blocks = (k + 31) / 32;
  y.assign(static_cast<size_t>(n * w.out), 0.0f);
  terms.assign(y.size(), 0.0f);
  std::vector<float> qa(static_cast<size_t>(k)), sa(static_cast<size_t>(blocks));
  std::vector<uint8_t> codes(32);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t b = 0; b < blocks; ++b) {
      const size_t len = static_cast<size_t>(std::min<int64_t>(32, k - b * 32));
      const uint8_t sc =
          quantize_block_fp8(&x[static_cast<size_t>(t * k + b * 32)], len, codes.data());
      sa[static_cast<size_t>(b)] = e8m0_to_f32(sc);
      for (size_t j = 0; j < len; ++j) qa[static_cast<size_t>(b * 32) + j] = e4m3_to_f32(codes[j]);
    }
    for (int64_t o = 0; o < w.out; ++o) {
      float acc = 0.0f;
      double abs_sum = 0.0;
      for (int64_t b = 0; b < blocks; ++b) {
        float partial = 0.0f;
        for (int64_t c = b * 32; c < std::min(k, b * 32 + 32); ++c) {
          const float prod = qa[static_cast<size_t>(c)] * code_value(w, o, c);
          partial += prod;
          abs_sum += std::fabs(double(prod) * sa[static_cast<size_t>(b)] * weight_scale(w, o, b));
        }
        acc = acc + (partial * sa[static_cast<size_t>(b)]) * weight_scale(w, o, b);
      }
      y[static_cast<size_t>(t * w.out + o)] = round_bf16(acc);
      terms[static_cast<size_t>(t * w.out + o)] = static_cast<float>(abs_sum);
    }
  }
}

// Each |got - want| <= 1 BF16 ulp of want + 2^-20 * terms.
void expect_linear_close(const std::vector<float>& got, const std::vector<float>& want,
                         const std::vector<float>& terms, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  size_t bad = 0, worst = 0;
  double worst_excess = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = bf16_ulp_at(want[i]) + std::ldexp(double(terms[i]), -20);
    const double err = std::isnan(got[i]) ? 1e30 : std::fabs(double(got[i]) - want[i]);
    if (err > tol) ++bad;
    if (err / tol > worst_excess) worst_excess = err / tol, worst = i;
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " outside tolerance; worst ["
                     << worst << "] got " << got[worst] << " want " << want[worst] << " ("
                     << worst_excess << " x tolerance)";
  report_error(what, worst_excess, "x tolerance", got.size());
}

class CudaLinearTest : public CudaOpTest {
 protected:
  // Quantised weights: GPU vs the block definition and vs cpu-reference.
  // w_offset / x_offset: the GPU's weight bytes and input rows that many bytes past an
  // allocation's start (misaligned rows).
  void check_quantised(WeightFormat f, int64_t n, int64_t in, int64_t out, LinearOutput o,
                       uint32_t seed, size_t w_offset = 0, size_t x_offset = 0) {
    const HostWeight hw = random_weight(f, out, in, seed);
    const LinearWeight wg = weight_at(gpu(), hw, w_offset), wc = upload(cpu(), hw);
    const std::vector<float> x = random_bf16(static_cast<size_t>(n * in), seed + 2, 2.0f);
    Pair xt = both_f32(Shape{n, in}, x);
    if (x_offset != 0) xt.gpu = f32_at(gpu(), Shape{n, in}, x, x_offset);
    Tensor yc = cpu().alloc(DType::F32, Shape{n, out});
    const LinearMode mode{LinearInput::ActQuantFp8, o};
    cpu().linear(xt.cpu, wc, mode, yc);
    std::vector<float> want, terms;
    reference_by_blocks(x, n, hw, want, terms);
    // The CUDA-core GEMV, and the tensor-core one where it takes the shape (gemv_tc.cuh), its
    // tiles' K units to the warps interleaved (the default) and in ranges (pass 2); the CUDA-core
    // one with FP8 decoded by shifts everywhere (pass 3) and by the hardware's conversion at one
    // act_quant'ed row only (pass 4), where by default it takes the conversion everywhere.
    for (const int pass : {0, 1, 2, 3, 4}) {
      const bool tc = pass == 1 || pass == 2;
      gpu().set_gemv_kernels(tc ? CudaBackend::GemvKernels::TensorCores
                                : CudaBackend::GemvKernels::CudaCores);
      gpu().set_interleaved_units(pass != 2);
      gpu().set_fp8_conversion(pass == 3   ? CudaBackend::Fp8Conversion::Off
                               : pass == 4 ? CudaBackend::Fp8Conversion::OneRow
                                           : CudaBackend::Fp8Conversion::All);
      Tensor yg = gpu_poisoned(DType::F32, Shape{n, out});
      gpu().linear(xt.gpu, wg, mode, yg);
      gpu().set_gemv_kernels(CudaBackend::GemvKernels::Auto);
      gpu().set_interleaved_units(true);
      gpu().set_fp8_conversion(CudaBackend::Fp8Conversion::All);
      std::vector<float> got = from_gpu<float>(yg);
      const std::string what =
          std::string(f == WeightFormat::Fp8Block ? "FP8" : "FP4") + " n=" + std::to_string(n) +
          " " + std::to_string(out) + "x" + std::to_string(in) +
          (w_offset + x_offset
               ? " offsets " + std::to_string(w_offset) + "/" + std::to_string(x_offset)
               : "") +
          (tc ? " (tensor cores where they fit)" : " (CUDA cores)") +
          (pass == 2 ? ", units in ranges" : "") +
          (pass == 3   ? ", FP8 by shifts"
           : pass == 4 ? ", FP8 converted at one act_quant'ed row only"
                       : "");
      if (o == LinearOutput::Bf16) {
        expect_linear_close(got, want, terms, what + " vs definition");
      } else {
        for (float& v : got) v = round_bf16(v);  // the definition's FP32 sum, compared in BF16
        expect_linear_close(got, want, terms, what + " (F32 out) vs definition");
      }
      expect_linear_close(from_gpu<float>(yg), from_cpu<float>(yc), terms,
                          what + " vs cpu-reference");
    }
  }

  // BF16 / F32 weights, input as is: against cpu-reference.
  void check_plain(WeightFormat f, int64_t n, int64_t in, int64_t out, LinearMode mode,
                   uint32_t seed, size_t w_offset = 0, size_t x_offset = 0) {
    const HostWeight hw = random_weight(f, out, in, seed);
    const LinearWeight wg = weight_at(gpu(), hw, w_offset), wc = upload(cpu(), hw);
    const std::vector<float> xv = random_bf16(static_cast<size_t>(n * in), seed + 2, 2.0f);
    Pair xt = both_f32(Shape{n, in}, xv);
    if (x_offset != 0) xt.gpu = f32_at(gpu(), Shape{n, in}, xv, x_offset);
    Tensor yg = gpu_poisoned(DType::F32, Shape{n, out});
    Tensor yc = cpu().alloc(DType::F32, Shape{n, out});
    gpu().linear(xt.gpu, wg, mode, yg);
    cpu().linear(xt.cpu, wc, mode, yc);
    // |products| <= |x| |w|: bound the sum by rows' norms.
    const std::vector<float> x = from_cpu<float>(xt.cpu);
    std::vector<float> terms(static_cast<size_t>(n * out), 0.0f);
    for (int64_t t = 0; t < n; ++t) {
      double s = 0;
      for (int64_t c = 0; c < in; ++c) s += std::fabs(x[static_cast<size_t>(t * in + c)]);
      for (int64_t j = 0; j < out; ++j) terms[static_cast<size_t>(t * out + j)] = float(s * 0.5);
    }
    std::vector<float> got = from_gpu<float>(yg), want = from_cpu<float>(yc);
    if (mode.output == LinearOutput::F32)
      for (size_t i = 0; i < got.size(); ++i)
        got[i] = round_bf16(got[i]), want[i] = round_bf16(want[i]);
    expect_linear_close(got, want, terms,
                        std::string(f == WeightFormat::Bf16 ? "BF16" : "F32") +
                            " n=" + std::to_string(n) + " " + std::to_string(out) + "x" +
                            std::to_string(in) + " offsets " + std::to_string(w_offset) + "/" +
                            std::to_string(x_offset));
  }
};

TEST_F(CudaLinearTest, Fp8GemvAndGemmFollowTheBlockDefinition) {
  for (int64_t n : {1, 3, 8, 20})
    check_quantised(WeightFormat::Fp8Block, n, 96, 40, LinearOutput::Bf16, 1);
  check_quantised(WeightFormat::Fp8Block, 2, 100, 33, LinearOutput::Bf16, 2);  // K % 4 != 0
  check_quantised(WeightFormat::Fp8Block, 12, 100, 33, LinearOutput::Bf16, 3);
  check_quantised(WeightFormat::Fp8Block, 5, 2304, 70, LinearOutput::F32, 4);  // K splits
}

// Shapes the tensor-core GEMV takes (K a multiple of 64): 1 to 8 rows, a partial last row tile,
// K split across blocks (few rows, long K; at 8 rows also by the staging budget).
TEST_F(CudaLinearTest, Fp8GemvOnTheTensorCores) {
  for (int64_t n : {1, 2, 5, 8})
    check_quantised(WeightFormat::Fp8Block, n, 256, 70, LinearOutput::Bf16, 60);
  check_quantised(WeightFormat::Fp8Block, 3, 4096, 40, LinearOutput::F32, 61);
  check_quantised(WeightFormat::Fp8Block, 8, 4096, 100, LinearOutput::Bf16, 62);
  check_quantised(WeightFormat::Fp8Block, 1, 640, 2000, LinearOutput::Bf16, 63);
}

TEST_F(CudaLinearTest, Fp4GemvAndGemmFollowTheBlockDefinition) {
  for (int64_t n : {1, 6, 17})
    check_quantised(WeightFormat::Fp4Row, n, 128, 24, LinearOutput::Bf16, 5);
  check_quantised(WeightFormat::Fp4Row, 2, 2304, 48, LinearOutput::Bf16, 6);
}

TEST_F(CudaLinearTest, Bf16AndF32WeightsMatchTheReference) {
  for (int64_t n : {1, 4, 9}) {
    check_plain(WeightFormat::Bf16, n, 64, 30, kBf16Linear, 7);
    check_plain(WeightFormat::Bf16, n, 300, 20, kF32Linear, 8);
    check_plain(WeightFormat::F32, n, 40, 10, kF32Linear, 9);
  }
  check_plain(WeightFormat::F32, 3, 70, 9, kQuantLinear, 10);
}

// Rows whose start is not 16-byte aligned (the whole weight shifted, or rows of K % 16 != 0
// bytes) take the narrow loads; inputs not 16-byte aligned the scalar staging; K not a multiple of
// the 16-byte chunk a partial last chunk; K splits a partial last split.
TEST_F(CudaLinearTest, MisalignedRowsTailsAndSplits) {
  for (size_t off : {1, 4, 8})
    check_quantised(WeightFormat::Fp8Block, 3, 512, 40, LinearOutput::Bf16, 40, off, 4);
  check_quantised(WeightFormat::Fp8Block, 1, 1100, 70, LinearOutput::F32, 41);  // 1100 % 16 = 12
  check_quantised(WeightFormat::Fp8Block, 8, 1100, 17, LinearOutput::Bf16, 42, 8, 8);
  check_quantised(WeightFormat::Fp4Row, 2, 1088, 40, LinearOutput::Bf16, 43, 4, 12);
  // GEMM-sized (more than 8 rows): the BF16 staging's scalar path (K % 4 != 0, a shifted input).
  check_quantised(WeightFormat::Fp8Block, 12, 1030, 20, LinearOutput::Bf16, 47);
  check_quantised(WeightFormat::Fp8Block, 12, 512, 40, LinearOutput::Bf16, 48, 0, 4);
  for (int64_t n : {1, 2, 5}) {
    check_plain(WeightFormat::Bf16, n, 264, 40, kBf16Linear, 44, 2, 4);
    check_plain(WeightFormat::Bf16, n, 1030, 9, kF32Linear, 45);  // 1030 % 8 = 6
    check_plain(WeightFormat::F32, n, 130, 70, kF32Linear, 46, 4, 4);
  }
}

// One nonzero weight per row (every FP8 / FP4 code in turn), F32 output: each output is a single
// product, so the GPU must equal cpu-reference bit for bit. Checks each code's decode (the
// smallest codes go through FP32 denormals, which a flush-to-zero build would lose) and the
// act_quant of the staging on blocks built to hit its edges: E4M3 ties, the subnormal steps, the
// largest value, zeros, blocks below the 1e-4 floor. F32 weights with act_quant: the identity.
TEST_F(CudaLinearTest, DecodeAndActQuantAreExact) {
  const int64_t k = 512;
  std::vector<float> x(static_cast<size_t>(2 * k));
  const float edges[] = {448.0f,         1.0625f,       1.1875f,       -3.25f,
                         0.015625f,      0.0146484375f, 0.0029296875f, -0.0009765625f,
                         0.00048828125f, 0.0f,          -0.0f,         240.0f,
                         232.0f,         0.5f,          0.53125f,      -447.0f};
  std::mt19937 rng(50);
  for (size_t b = 0; b < x.size() / 32; ++b) {
    const float s = std::ldexp(1.0f, static_cast<int>(rng() % 24) - 14);
    for (size_t j = 0; j < 32; ++j) {
      const float y = j < 16 ? edges[j] : (static_cast<float>(rng() % 8192) / 16.0f - 256.0f);
      x[b * 32 + j] = b % 9 == 4 ? 0.0f : b % 9 == 7 ? y * 1e-9f : y * s;
    }
  }
  const LinearMode mode{LinearInput::ActQuantFp8, LinearOutput::F32};
  for (WeightFormat f : {WeightFormat::Fp8Block, WeightFormat::Fp4Row, WeightFormat::F32}) {
    HostWeight hw = random_weight(f, k, k, 51);
    std::fill(hw.data.begin(), hw.data.end(), 0);
    for (int64_t o = 0; o < k; ++o) {
      const int64_t c = (o * 37) % k;  // column of row o's one weight
      if (f == WeightFormat::Fp8Block) {
        const auto code = static_cast<uint8_t>(o % 256);
        hw.data[static_cast<size_t>(o * k + c)] = (code & 0x7F) == 0x7F ? code ^ 1 : code;
      } else if (f == WeightFormat::Fp4Row) {
        hw.data[static_cast<size_t>(o * k / 2 + c / 2)] =
            static_cast<uint8_t>((o % 16) << (c % 2 ? 4 : 0));
      } else {
        const float one = 1.0f;
        std::memcpy(&hw.data[static_cast<size_t>(4 * (o * k + c))], &one, 4);
      }
    }
    const LinearWeight wg = upload(gpu(), hw), wc = upload(cpu(), hw);
    // 2 rows take the GEMV's staging, 16 the GEMM's (prepare_bf16_kernel, act_quant_f32_kernel);
    // one row the one-row GEMV; FP8 decoded by the hardware's conversion and by shifts.
    for (const auto& [n, cvt] : std::vector<std::pair<int64_t, bool>>{
             {1, true}, {1, false}, {2, true}, {2, false}, {16, true}}) {
      gpu().set_fp8_conversion(cvt ? CudaBackend::Fp8Conversion::All
                                   : CudaBackend::Fp8Conversion::Off);
      std::vector<float> xn;
      for (int64_t r = 0; r < n; ++r)  // rows 0 and 1 of x in turn
        xn.insert(xn.end(), x.begin() + (r % 2) * k, x.begin() + (r % 2 + 1) * k);
      Pair xt = both_f32(Shape{n, k}, xn);
      Tensor yg = gpu_poisoned(DType::F32, Shape{n, k});
      Tensor yc = cpu().alloc(DType::F32, Shape{n, k});
      gpu().linear(xt.gpu, wg, mode, yg);
      cpu().linear(xt.cpu, wc, mode, yc);
      expect_identical(from_gpu<float>(yg), from_cpu<float>(yc),
                       std::string("single products, ") +
                           (f == WeightFormat::Fp8Block ? "FP8"
                            : f == WeightFormat::Fp4Row ? "FP4"
                                                        : "F32 (act_quant)") +
                           ", " + std::to_string(n) + " rows" + (cvt ? "" : ", FP8 by shifts"));
    }
    gpu().set_fp8_conversion(CudaBackend::Fp8Conversion::All);
  }
}

TEST_F(CudaLinearTest, F32OutputKeepsTheFp32Sum) {
  std::vector<uint16_t> wbits = {f32_to_bf16(1.0f), f32_to_bf16(1.0f)};
  const std::array<int64_t, 2> ws = {1, 2};
  TensorView v{"w", DType::BF16, ws, reinterpret_cast<const uint8_t*>(wbits.data()), 4};
  const LinearWeight w = gpu().upload_linear(v, nullptr);
  Tensor x = gpu().alloc(DType::F32, Shape{1, 2}), y = gpu().alloc(DType::F32, Shape{1, 1});
  const std::vector<float> xv = {1.0f, 0x1p-10f};
  gpu().write(x, xv.data(), 8);
  gpu().linear(x, w, kF32Linear, y);
  EXPECT_EQ(from_gpu<float>(y)[0], 1.0f + 0x1p-10f);
  gpu().linear(x, w, kBf16Linear, y);
  EXPECT_EQ(from_gpu<float>(y)[0], 1.0f);
}

TEST_F(CudaLinearTest, GroupedLinearMatchesTheReference) {
  const int64_t groups = 4, in_g = 64, out_g = 24;
  const HostWeight hw = random_weight(WeightFormat::Fp8Block, groups * out_g, in_g, 11);
  const LinearWeight wg = upload(gpu(), hw), wc = upload(cpu(), hw);
  for (int64_t n : {1, 2, 11}) {
    Pair x = both_f32(Shape{n, groups * in_g},
                      random_bf16(static_cast<size_t>(n * groups * in_g), 12, 1.0f));
    Tensor yg = gpu_poisoned(DType::F32, Shape{n, groups * out_g});
    Tensor yc = cpu().alloc(DType::F32, Shape{n, groups * out_g});
    gpu().grouped_linear(x.gpu, wg, groups, yg);
    cpu().grouped_linear(x.cpu, wc, groups, yc);
    // Terms bounded by 64 * |x|max * |w|max at these magnitudes: use the row sums of |x| * 448 *
    // 2^-9.
    std::vector<float> terms(static_cast<size_t>(n * groups * out_g), 64.0f * 4.0f);
    expect_linear_close(from_gpu<float>(yg), from_cpu<float>(yc), terms,
                        "grouped n=" + std::to_string(n));
  }
}

// The grouped linear on the tensor cores (gemv_tc.cu's BF16 form: groups whose rows fill 32-row
// scale tiles, K a multiple of 64), forced at every row count and by Auto (from 5 rows; fewer on
// the CUDA cores), against cpu-reference.
TEST_F(CudaLinearTest, GroupedLinearOnTheTensorCores) {
  const int64_t groups = 3, in_g = 192, out_g = 64;
  const HostWeight hw = random_weight(WeightFormat::Fp8Block, groups * out_g, in_g, 13);
  const LinearWeight wg = upload(gpu(), hw), wc = upload(cpu(), hw);
  for (const bool forced : {true, false}) {
    gpu().set_gemv_kernels(forced ? CudaBackend::GemvKernels::TensorCores
                                  : CudaBackend::GemvKernels::Auto);
    for (int64_t n : {1, 3, 5, 8}) {
      Pair x = both_f32(Shape{n, groups * in_g},
                        random_bf16(static_cast<size_t>(n * groups * in_g), 14 + n, 1.0f));
      Tensor yg = gpu_poisoned(DType::F32, Shape{n, groups * out_g});
      Tensor yc = cpu().alloc(DType::F32, Shape{n, groups * out_g});
      gpu().grouped_linear(x.gpu, wg, groups, yg);
      cpu().grouped_linear(x.cpu, wc, groups, yc);
      std::vector<float> terms(static_cast<size_t>(n * groups * out_g), float(in_g) * 4.0f);
      expect_linear_close(from_gpu<float>(yg), from_cpu<float>(yc), terms,
                          "grouped, tensor cores " + std::string(forced ? "forced" : "by Auto") +
                              ", n=" + std::to_string(n));
    }
  }
  gpu().set_gemv_kernels(CudaBackend::GemvKernels::Auto);
}

TEST_F(CudaLinearTest, FullShapesOfTheV41Layers) {
  FD_REQUIRE_FULL_SHAPES();
  check_quantised(WeightFormat::Fp8Block, 1, 5120, 1280, LinearOutput::Bf16, 20);  // wq_a
  check_quantised(WeightFormat::Fp8Block, 12, 5120, 1280, LinearOutput::Bf16, 21);
  check_quantised(WeightFormat::Fp8Block, 1, 1280, 32768, LinearOutput::Bf16, 22);  // wq_b
  check_quantised(WeightFormat::Fp8Block, 1, 5120, 512, LinearOutput::Bf16, 23);    // wkv
  check_quantised(WeightFormat::Fp8Block, 1, 8192, 5120, LinearOutput::F32, 24);    // wo_b
  check_quantised(WeightFormat::Fp8Block, 12, 8192, 5120, LinearOutput::F32, 25);
  check_quantised(WeightFormat::Fp4Row, 1, 5120, 2304, LinearOutput::Bf16, 26);  // expert w1
  check_quantised(WeightFormat::Fp4Row, 1, 2304, 5120, LinearOutput::Bf16, 27);  // expert w2
  check_plain(WeightFormat::Bf16, 1, 5120, 384, kF32Linear, 28);                 // gate
  check_plain(WeightFormat::Bf16, 12, 5120, 384, kF32Linear, 29);
}

TEST_F(CudaLinearTest, GroupedWoAAtFullShape) {
  FD_REQUIRE_FULL_SHAPES();
  const int64_t groups = 8, in_g = 8 * 512, out_g = 1024;
  const HostWeight hw = random_weight(WeightFormat::Fp8Block, groups * out_g, in_g, 30);
  const LinearWeight wg = upload(gpu(), hw), wc = upload(cpu(), hw);
  for (const auto& [n, cvt] : std::vector<std::pair<int64_t, bool>>{
           {1, true}, {1, false}, {8, true}, {8, false}, {12, true}}) {
    // wo_a's unquantised GEMV decoded both ways (the conversion by default, and shifts)
    gpu().set_fp8_conversion(cvt ? CudaBackend::Fp8Conversion::All
                                 : CudaBackend::Fp8Conversion::Off);
    Pair x = both_f32(Shape{n, groups * in_g},
                      random_bf16(static_cast<size_t>(n * groups * in_g), 31, 0.1f));
    Tensor yg = gpu_poisoned(DType::F32, Shape{n, groups * out_g});
    Tensor yc = cpu().alloc(DType::F32, Shape{n, groups * out_g});
    gpu().grouped_linear(x.gpu, wg, groups, yg);
    cpu().grouped_linear(x.cpu, wc, groups, yc);
    std::vector<float> terms(static_cast<size_t>(n * groups * out_g), float(in_g) * 0.1f * 2.0f);
    expect_linear_close(from_gpu<float>(yg), from_cpu<float>(yc), terms,
                        "wo_a n=" + std::to_string(n) + (cvt ? "" : ", FP8 by shifts"));
  }
  gpu().set_fp8_conversion(CudaBackend::Fp8Conversion::All);
}

}  // namespace
}  // namespace flashdesk::test
