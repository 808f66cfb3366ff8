// mHC and Engram on the CUDA backend against cpu-reference on random inputs: the mixes (FP32
// outputs after the dot products over hc*D and Sinkhorn) within 1e-4 absolute, collapse and
// expansion bit-identical (same rounding order), the fused collapse-and-norm ops within a BF16 ulp
// (their streams bit-identical), Engram's gather bit-identical and its gated
// update within 1 BF16 ulp.
#include <algorithm>
#include <string>
#include <tuple>

#include "tests/cuda/cuda_test_util.h"

namespace flashdesk::test {
namespace {

// Fixtures with the streams' two storages at hand.
class CudaStreamsTest : public CudaOpTest {
 protected:
  // X's values (BF16 values held as F32) as a BF16 tensor, and back.
  Tensor to_bf16(const Tensor& x) {
    const std::vector<float> v = from_gpu<float>(x);
    std::vector<uint16_t> bits(v.size());
    for (size_t i = 0; i < v.size(); ++i) bits[i] = f32_to_bf16(v[i]);
    Tensor t = gpu().alloc(DType::BF16, x.shape());
    gpu().write(t, bits.data(), t.nbytes());
    return t;
  }
  std::vector<float> widen(const Tensor& x) {
    const std::vector<uint16_t> bits = from_gpu<uint16_t>(x);
    std::vector<float> v(bits.size());
    for (size_t i = 0; i < v.size(); ++i) v[i] = bf16_to_f32(bits[i]);
    return v;
  }
};

class CudaHcTest : public CudaStreamsTest {
 protected:
  // The mixes on the beside lane, twice outstanding while the main stream runs the same mixes
  // again (work the lane's kernels overlap), joined in turn: the in-place results to the bit.
  void check_beside(const Tensor& X, const HcParams& p, const HcSettings& s, const Tensor& pre,
                    const Tensor& post, const Tensor& comb) {
    const int64_t n = X.rows(), hc = s.hc;
    Tensor pre1 = gpu_poisoned(DType::F32, Shape{n, hc}),
           post1 = gpu_poisoned(DType::F32, Shape{n, hc});
    Tensor comb1 = gpu_poisoned(DType::F32, Shape{n, hc, hc});
    Tensor pre2 = gpu_poisoned(DType::F32, Shape{n, hc}),
           post2 = gpu_poisoned(DType::F32, Shape{n, hc});
    Tensor comb2 = gpu_poisoned(DType::F32, Shape{n, hc, hc});
    Tensor pre3 = gpu_poisoned(DType::F32, Shape{n, hc}),
           post3 = gpu_poisoned(DType::F32, Shape{n, hc});
    Tensor comb3 = gpu_poisoned(DType::F32, Shape{n, hc, hc});
    const Backend::Beside first = gpu().hc_mixes_beside(X, p, s, pre1, post1, comb1);
    const Backend::Beside second = gpu().hc_mixes_beside(X, p, s, pre2, post2, comb2);
    EXPECT_GE(first.id, 0);
    EXPECT_GT(second.id, first.id);
    gpu().hc_mixes(X, p, s, pre3, post3, comb3);
    gpu().join(first);
    gpu().join(second);
    for (const auto& [got, want, what] : {std::tuple{&pre1, &pre, "pre"},
                                          {&post1, &post, "post"},
                                          {&comb1, &comb, "comb"},
                                          {&pre2, &pre, "pre"},
                                          {&post2, &post, "post"},
                                          {&comb2, &comb, "comb"},
                                          {&pre3, &pre, "pre"},
                                          {&post3, &post, "post"},
                                          {&comb3, &comb, "comb"}})
      expect_identical(from_gpu<float>(*got), from_gpu<float>(*want),
                       std::string("beside lane: ") + what);
  }

  // X: BF16 values, as the model's streams are, or (f32_corner) with values of the first 64 rows'
  // first 64 elements moved off BF16 (the tensor-core mixes stage all three planes of such a
  // chunk, one of the rest).
  void check_mixes(int64_t n, int64_t hc, int64_t d, uint32_t seed, bool f32_corner = false) {
    const int64_t flat = hc * d, n_mix = (2 + hc) * hc;
    std::vector<float> xv = random_bf16(static_cast<size_t>(n * flat), seed, 1.0f);
    if (f32_corner)
      for (int64_t r = 0; r < std::min<int64_t>(n, 64); ++r)
        for (int64_t c = r % 7; c < std::min<int64_t>(flat, 64); c += 7)
          xv[static_cast<size_t>(r * flat + c)] *= 1.0009765625f;  // 1 + 2^-10: off BF16
    Pair X = both_f32(Shape{n, hc, d}, xv);
    HcParams pg, pc;
    const Pair fn = both_f32(Shape{n_mix, flat}, random_uniform(static_cast<size_t>(n_mix * flat),
                                                                seed + 1, -0.02f, 0.02f));
    const Pair base =
        both_f32(Shape{n_mix}, random_uniform(static_cast<size_t>(n_mix), seed + 2, -1.0f, 1.0f));
    const Pair sc = both_f32(Shape{3}, {0.7f, 1.3f, 0.9f});
    pg = {fn.gpu, base.gpu, sc.gpu};
    pc = {fn.cpu, base.cpu, sc.cpu};
    const HcSettings s{hc, 1e-6f, 1e-6f, 20};
    Pair pre = both_alloc(DType::F32, Shape{n, hc}), post = both_alloc(DType::F32, Shape{n, hc});
    Pair comb = both_alloc(DType::F32, Shape{n, hc, hc});
    pre.gpu = gpu_poisoned(DType::F32, Shape{n, hc});
    gpu().hc_mixes(X.gpu, pg, s, pre.gpu, post.gpu, comb.gpu);
    cpu().hc_mixes(X.cpu, pc, s, pre.cpu, post.cpu, comb.cpu);
    expect_abs_close(from_gpu<float>(pre.gpu), from_cpu<float>(pre.cpu), 1e-4, "pre");
    expect_abs_close(from_gpu<float>(post.gpu), from_cpu<float>(post.cpu), 1e-4, "post");
    expect_abs_close(from_gpu<float>(comb.gpu), from_cpu<float>(comb.cpu), 1e-4, "comb");
    check_beside(X.gpu, pg, s, pre.gpu, post.gpu, comb.gpu);

    // Collapse and expansion with those (CPU) mixes on both sides: bit-identical.
    const std::vector<float> pre_v = from_cpu<float>(pre.cpu), post_v = from_cpu<float>(post.cpu);
    const std::vector<float> comb_v = from_cpu<float>(comb.cpu);
    Pair pre2 = both_f32(Shape{n, hc}, pre_v), post2 = both_f32(Shape{n, hc}, post_v);
    Pair comb2 = both_f32(Shape{n, hc, hc}, comb_v);
    Pair u = both_alloc(DType::F32, Shape{n, d});
    gpu().hc_collapse(X.gpu, pre2.gpu, u.gpu);
    cpu().hc_collapse(X.cpu, pre2.cpu, u.cpu);
    expect_identical(from_gpu<float>(u.gpu), from_cpu<float>(u.cpu), "collapse");
    Pair y = both_f32(Shape{n, d}, random_bf16(static_cast<size_t>(n * d), seed + 3));
    Pair out = both_alloc(DType::F32, Shape{n, hc, d});
    gpu().hc_expand(X.gpu, y.gpu, post2.gpu, comb2.gpu, out.gpu);
    cpu().hc_expand(X.cpu, y.cpu, post2.cpu, comb2.cpu, out.cpu);
    expect_identical(from_gpu<float>(out.gpu), from_cpu<float>(out.cpu), "expand");

    // The fused sublayer boundaries (one kernel a row where d is a multiple of 4, else the
    // composed ops): the streams bit-identical, the normed input within an ulp (the squares'
    // sum order is not rms_norm's).
    Pair norm = both_f32(Shape{d}, random_uniform(static_cast<size_t>(d), seed + 4, 0.5f, 1.5f));
    Pair un = both_alloc(DType::F32, Shape{n, d});
    un.gpu = gpu_poisoned(DType::F32, Shape{n, d});
    gpu().hc_collapse_norm(X.gpu, pre2.gpu, norm.gpu, 1e-6f, un.gpu);
    cpu().hc_collapse_norm(X.cpu, pre2.cpu, norm.cpu, 1e-6f, un.cpu);
    expect_bf16_close(from_gpu<float>(un.gpu), from_cpu<float>(un.cpu), 1.0, 0.0,
                      "collapse and norm");
    Pair out2 = both_alloc(DType::F32, Shape{n, hc, d});
    out2.gpu = gpu_poisoned(DType::F32, Shape{n, hc, d});
    un.gpu = gpu_poisoned(DType::F32, Shape{n, d});
    gpu().hc_expand_collapse_norm(X.gpu, y.gpu, post2.gpu, comb2.gpu, pre2.gpu, norm.gpu, 1e-6f,
                                  out2.gpu, un.gpu);
    cpu().hc_expand_collapse_norm(X.cpu, y.cpu, post2.cpu, comb2.cpu, pre2.cpu, norm.cpu, 1e-6f,
                                  out2.cpu, un.cpu);
    expect_identical(from_gpu<float>(out2.gpu), from_cpu<float>(out.cpu), "expand, fused");
    expect_bf16_close(from_gpu<float>(un.gpu), from_cpu<float>(un.cpu), 1.0, 0.0,
                      "expand, collapse and norm");
    if (!f32_corner) {
      const BoundaryInputs in{pg, s, pre2.gpu, post2.gpu, comb2.gpu, y.gpu, norm.gpu};
      check_bf16_streams(X.gpu, in);
    }
  }

  struct BoundaryInputs {
    const HcParams& p;
    const HcSettings& s;
    const Tensor &pre, &post, &comb, &y, &norm;
  };

  // Every op on BF16 streams (CudaBackend::stream_dtype's default) gives the bits it gives on the
  // F32 streams of the same (BF16) values, and BF16 outputs hold those F32 outputs exactly.
  void check_bf16_streams(const Tensor& X32, const BoundaryInputs& in) {
    const Shape xs = X32.shape();
    const int64_t n = X32.rows(), hc = in.s.hc, d = xs.row_numel() / hc;
    const Tensor X16 = to_bf16(X32);
    Tensor pre32 = gpu().alloc(DType::F32, Shape{n, hc});
    Tensor post32 = gpu().alloc(DType::F32, Shape{n, hc});
    Tensor comb32 = gpu().alloc(DType::F32, Shape{n, hc, hc});
    Tensor pre16 = gpu_poisoned(DType::F32, Shape{n, hc});
    Tensor post16 = gpu_poisoned(DType::F32, Shape{n, hc});
    Tensor comb16 = gpu_poisoned(DType::F32, Shape{n, hc, hc});
    gpu().hc_mixes(X32, in.p, in.s, pre32, post32, comb32);
    gpu().hc_mixes(X16, in.p, in.s, pre16, post16, comb16);
    expect_identical(from_gpu<float>(pre16), from_gpu<float>(pre32), "bf16 streams: pre");
    expect_identical(from_gpu<float>(post16), from_gpu<float>(post32), "bf16 streams: post");
    expect_identical(from_gpu<float>(comb16), from_gpu<float>(comb32), "bf16 streams: comb");

    const auto same = [&](const Tensor& got16, const Tensor& want32, const std::string& what) {
      expect_identical(widen(got16), from_gpu<float>(want32), "bf16 streams: " + what);
    };
    Tensor u32 = gpu().alloc(DType::F32, Shape{n, d}), u16 = gpu_poisoned(DType::F32, Shape{n, d});
    gpu().hc_collapse(X32, in.pre, u32);
    gpu().hc_collapse(X16, in.pre, u16);
    expect_identical(from_gpu<float>(u16), from_gpu<float>(u32), "bf16 streams: collapse");
    gpu().hc_collapse_norm(X32, in.pre, in.norm, 1e-6f, u32);
    gpu().hc_collapse_norm(X16, in.pre, in.norm, 1e-6f, u16);
    expect_identical(from_gpu<float>(u16), from_gpu<float>(u32), "bf16 streams: collapse, norm");
    Tensor out32 = gpu().alloc(DType::F32, xs), out16 = gpu_poisoned(DType::BF16, xs);
    gpu().hc_expand(X32, in.y, in.post, in.comb, out32);
    gpu().hc_expand(X16, in.y, in.post, in.comb, out16);
    same(out16, out32, "expand");
    out16 = gpu_poisoned(DType::BF16, xs);
    u16 = gpu_poisoned(DType::F32, Shape{n, d});
    gpu().hc_expand_collapse_norm(X32, in.y, in.post, in.comb, in.pre, in.norm, 1e-6f, out32, u32);
    gpu().hc_expand_collapse_norm(X16, in.y, in.post, in.comb, in.pre, in.norm, 1e-6f, out16, u16);
    same(out16, out32, "expand, fused");
    expect_identical(from_gpu<float>(u16), from_gpu<float>(u32), "bf16 streams: fused norm");
  }
};

TEST_F(CudaHcTest, MixesCollapseAndExpandMatchTheReference) {
  check_mixes(1, 4, 64, 1);
  check_mixes(6, 4, 200, 2);  // two row tiles, a partial split
  check_mixes(3, 2, 96, 3);
  // Prefill-sized: the CUDA-core kernel's 32-row tiles, the last one partial, with rows not a
  // multiple of four elements (the scalar paths of the collapse and the expansion); the
  // tensor-core mixes (rows a multiple of 64 elements), the last 64-row tile partial, the row in
  // two splits (the emulation's four multiprocessors).
  check_mixes(257, 3, 30, 6);
  check_mixes(260, 4, 64, 8);
  // Values off BF16 in the first 64-value chunk of the first 64-row tile: all three planes there,
  // the hi plane alone elsewhere.
  check_mixes(260, 4, 64, 9, true);
}

TEST_F(CudaHcTest, FullShapes) {
  FD_REQUIRE_FULL_SHAPES();
  check_mixes(1, 4, 5120, 4);
  check_mixes(9, 4, 5120, 5);
  check_mixes(2, 4, 6148, 7);  // past the fused kernel's 6144 values a row: the composed ops
  // A prefill's rows: the tensor-core mixes and the boundaries' row-walking kernel, whose two
  // stages of F32 streams take 200 KiB of shared memory (hc_boundary_rows.cu).
  check_mixes(300, 4, 5120, 10);
}

class CudaEngramTest : public CudaStreamsTest {};

TEST_F(CudaEngramTest, GatherAndUpdateMatchTheReference) {
  const int64_t rows = 50, width = 64, n = 5, cols = 3, hc = 4, d = 48;
  const std::vector<uint8_t> codes = random_e4m3(static_cast<size_t>(rows * width), 1);
  const std::vector<uint8_t> scales = random_e8m0(static_cast<size_t>(rows * width / 32), 2, -6);
  Pair c = both(DType::F8_E4M3, Shape{rows, width}, codes);
  Pair s = both(DType::F8_E8M0, Shape{rows, width / 32}, scales);
  std::vector<int64_t> ids(static_cast<size_t>(n * cols));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int64_t((i * 17 + 3) % rows);
  Pair e = both_alloc(DType::F32, Shape{n, cols * width});
  gpu().engram_gather(QuantTable{c.gpu, s.gpu}, ids, e.gpu);
  cpu().engram_gather(QuantTable{c.cpu, s.cpu}, ids, e.cpu);
  expect_identical(from_gpu<float>(e.gpu), from_cpu<float>(e.cpu), "engram gather");
  // The same table left in host memory (upload_table): gathered on the host, the same bits, and
  // no device bytes for it.
  const std::vector<int64_t> shape_c = {rows, width}, shape_s = {rows, width / 32};
  const size_t before = gpu().weight_bytes();
  const Tensor host_codes =
      gpu().upload_table(TensorView{"codes", DType::F8_E4M3, shape_c, codes.data(), codes.size()});
  const Tensor host_scales = gpu().upload_table(
      TensorView{"scales", DType::F8_E8M0, shape_s, scales.data(), scales.size()});
  EXPECT_TRUE(host_codes.host_accessible());
  EXPECT_EQ(gpu().weight_bytes(), before);
  Tensor e_host = gpu_poisoned(DType::F32, Shape{n, cols * width});
  const uint64_t syncs = gpu().host_syncs();
  gpu().engram_gather(QuantTable{host_codes, host_scales}, ids, e_host);
  EXPECT_EQ(gpu().host_syncs(), syncs) << "the host's ids need no wait";
  expect_identical(from_gpu<float>(e_host), from_cpu<float>(e.cpu), "engram gather, host table");

  Pair X = both_f32(Shape{n, hc, d}, random_bf16(static_cast<size_t>(n * hc * d), 3));
  Pair kv = both_f32(Shape{n, (hc + 1) * d}, random_bf16(static_cast<size_t>(n * (hc + 1) * d), 4));
  Pair qw = both_f32(Shape{hc, d}, random_uniform(static_cast<size_t>(hc * d), 5, 0.5f, 1.5f));
  Pair kw = both_f32(Shape{hc, d}, random_uniform(static_cast<size_t>(hc * d), 6, 0.5f, 1.5f));
  const std::vector<uint8_t> masked = {0, 1, 0, 0, 1};
  Tensor X16 = to_bf16(X.gpu);
  gpu().engram_update(X.gpu, kv.gpu, qw.gpu, kw.gpu, masked, 1e-6f);
  cpu().engram_update(X.cpu, kv.cpu, qw.cpu, kw.cpu, masked, 1e-6f);
  expect_bf16_close(from_gpu<float>(X.gpu), from_cpu<float>(X.cpu), 1.0, 0.0, "engram update");
  gpu().engram_update(X16, kv.gpu, qw.gpu, kw.gpu, masked, 1e-6f);
  expect_identical(widen(X16), from_gpu<float>(X.gpu), "engram update, BF16 streams");
  gpu().engram_update(X.gpu, kv.gpu, qw.gpu, kw.gpu, {}, 1e-6f);
  cpu().engram_update(X.cpu, kv.cpu, qw.cpu, kw.cpu, {}, 1e-6f);
  expect_bf16_close(from_gpu<float>(X.gpu), from_cpu<float>(X.cpu), 1.0, 0.0, "engram unmasked");
}

// As a decode step gathers its Engram rows (StepRunner::prefetch_engram): from a host table in a
// beside section at the step's start, taken after more than the lane's eight outstanding
// sections have opened and been joined since (the sublayers' mixes); that late join is covered
// by the later ones, and the rows are the reference's bits.
TEST_F(CudaEngramTest, RowsGatheredBesideAndJoinedLate) {
  const int64_t rows = 40, width = 64, n = 3, cols = 2;
  const std::vector<uint8_t> codes = random_e4m3(static_cast<size_t>(rows * width), 7);
  const std::vector<uint8_t> scales = random_e8m0(static_cast<size_t>(rows * width / 32), 8, -6);
  const std::vector<int64_t> shape_c = {rows, width}, shape_s = {rows, width / 32};
  const Tensor host_codes =
      gpu().upload_table(TensorView{"codes", DType::F8_E4M3, shape_c, codes.data(), codes.size()});
  const Tensor host_scales = gpu().upload_table(
      TensorView{"scales", DType::F8_E8M0, shape_s, scales.data(), scales.size()});
  Pair c = both(DType::F8_E4M3, Shape{rows, width}, codes);
  Pair s = both(DType::F8_E8M0, Shape{rows, width / 32}, scales);
  std::vector<int64_t> ids(static_cast<size_t>(n * cols));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int64_t((i * 13 + 5) % rows);
  Tensor e = gpu_poisoned(DType::F32, Shape{n, cols * width});
  gpu().beside_begin();
  gpu().engram_gather(QuantTable{host_codes, host_scales}, ids, e);
  const Backend::Beside ahead = gpu().beside_end();
  Tensor other = gpu().alloc(DType::F32, Shape{n, width});
  const std::vector<float> zeros(static_cast<size_t>(n * width), 0.0f);
  for (int i = 0; i < 10; ++i) {
    gpu().beside_begin();
    gpu().write(other, zeros.data(), zeros.size() * sizeof(float));
    gpu().join(gpu().beside_end());
  }
  gpu().join(ahead);
  Tensor want = cpu().alloc(DType::F32, Shape{n, cols * width});
  cpu().engram_gather(QuantTable{c.cpu, s.cpu}, ids, want);
  expect_identical(from_gpu<float>(e), from_cpu<float>(want), "engram rows gathered beside");
}

}  // namespace
}  // namespace flashdesk::test
