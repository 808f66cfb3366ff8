// MoE on the CUDA backend against cpu-reference: routing ids exact (random scores have no ties)
// and weights within 1e-6 relative; the experts (grouped launch up to 8 rows; beyond, the
// tensor-core kernels where the shapes allow, else per-expert GEMMs) within 4 BF16 ulps at the
// larger of the value and the output's RMS: each expert's output is rounded to BF16, and a gate or
// up value one ulp apart (FP32 order) can move it by one of its ulps; moe_experts_rounded gives
// the BF16 values of moe_experts' sums bit for bit.
#include <deque>

#include "tests/cuda/cuda_test_util.h"

namespace flashdesk::test {
namespace {

class CudaMoeTest : public CudaOpTest {
 protected:
  // cpu-reference keeps pointers to uploaded bytes (as it does into the mapped checkpoint): the
  // host copies live as long as the test.
  std::deque<std::vector<uint8_t>> host_bytes_;

  LinearWeight weight_on(Backend& be, DType dt, int64_t out, int64_t in,
                         const std::vector<uint8_t>& data, const std::vector<uint8_t>& scale,
                         bool in_host = false) {
    const int64_t cols = dt == DType::I8 ? in / 2 : in;
    const std::array<int64_t, 2> ws = {out, cols};
    TensorView w{"expert.weight", dt, ws, data.data(), data.size()};
    const std::array<int64_t, 2> ss = {dt == DType::I8 ? out : (out + 31) / 32, (in + 31) / 32};
    TensorView s{"expert.scale", DType::F8_E8M0, ss, scale.data(), scale.size()};
    return be.upload_linear(w, &s, in_host);
  }
  // An expert with FP4 (routed) or FP8 (shared) weights, the same bytes on both backends.
  // gpu_in_host: the CUDA side's copy stays in host memory (the hybrid placement).
  std::pair<ExpertWeights, ExpertWeights> expert(bool fp4, int64_t d, int64_t inter, uint32_t seed,
                                                 bool gpu_in_host = false) {
    const DType dt = fp4 ? DType::I8 : DType::F8_E4M3;
    std::pair<ExpertWeights, ExpertWeights> both_sides;
    LinearWeight* g[3] = {&both_sides.first.w1, &both_sides.first.w3, &both_sides.first.w2};
    LinearWeight* c[3] = {&both_sides.second.w1, &both_sides.second.w3, &both_sides.second.w2};
    for (int m = 0; m < 3; ++m) {
      const int64_t out = m == 2 ? d : inter, in = m == 2 ? inter : d;
      const size_t bytes = static_cast<size_t>(fp4 ? out * in / 2 : out * in);
      const std::vector<uint8_t>& data = host_bytes_.emplace_back(
          fp4 ? random_bytes(bytes, seed + m) : random_e4m3(bytes, seed + m));
      const size_t scales =
          static_cast<size_t>(fp4 ? out * in / 32 : (out + 31) / 32 * ((in + 31) / 32));
      const std::vector<uint8_t>& scale =
          host_bytes_.emplace_back(random_e8m0(scales, seed + 10 + m, fp4 ? -4 : -10));
      *g[m] = weight_on(gpu(), dt, out, in, data, scale, gpu_in_host);
      *c[m] = weight_on(cpu(), dt, out, in, data, scale);
    }
    return both_sides;
  }

  // routed_in_host: the routed experts in host memory on the CUDA side (computed on the CPU).
  void check_experts(int64_t n, int64_t d, int64_t inter, int64_t E, int64_t k, int distinct,
                     bool with_shared, bool with_absent, uint32_t seed,
                     bool routed_in_host = false) {
    std::vector<std::pair<ExpertWeights, ExpertWeights>> pool;
    for (int i = 0; i < distinct; ++i)
      pool.push_back(expert(true, d, inter, seed + 100 * i, routed_in_host));
    auto shared = expert(false, d, inter, seed + 7777);
    std::vector<const ExpertWeights*> eg(static_cast<size_t>(E)), ec(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) {
      const bool absent = with_absent && e % 5 == 3;  // another device's experts
      eg[static_cast<size_t>(e)] =
          absent ? nullptr : &pool[static_cast<size_t>(e % distinct)].first;
      ec[static_cast<size_t>(e)] =
          absent ? nullptr : &pool[static_cast<size_t>(e % distinct)].second;
    }
    std::mt19937 rng(seed);
    std::vector<int32_t> ids(static_cast<size_t>(n * k));
    for (int64_t t = 0; t < n; ++t) {
      std::vector<int32_t> all(static_cast<size_t>(E));
      std::iota(all.begin(), all.end(), 0);
      std::shuffle(all.begin(), all.end(), rng);
      for (int64_t j = 0; j < k; ++j)
        ids[static_cast<size_t>(t * k + j)] = all[static_cast<size_t>(j)];
    }
    Pair id = both(DType::I32, Shape{n, k}, ids);
    Pair w =
        both_f32(Shape{n, k}, random_uniform(static_cast<size_t>(n * k), seed + 1, 0.1f, 1.5f));
    Pair x = both_f32(Shape{n, d}, random_bf16(static_cast<size_t>(n * d), seed + 2, 1.0f));
    Tensor yg = gpu_poisoned(DType::F32, Shape{n, d});
    Tensor yc = cpu().alloc(DType::F32, Shape{n, d});
    const float limit = 7.0f;
    const uint64_t host_calls = gpu().host_moe_calls();
    gpu().moe_experts(x.gpu, id.gpu, w.gpu, eg, with_shared ? &shared.first : nullptr, limit, yg);
    EXPECT_EQ(gpu().host_moe_calls(), host_calls + (routed_in_host ? 1 : 0));
    cpu().moe_experts(x.cpu, id.cpu, w.cpu, ec, with_shared ? &shared.second : nullptr, limit, yc);
    const std::vector<float> want = from_cpu<float>(yc);
    const std::string what = "moe n=" + std::to_string(n) + " E=" + std::to_string(E) +
                             (routed_in_host ? " routed in host memory" : "");
    if (routed_in_host && !with_shared)  // the CPU computed it all: the reference's bits
      expect_identical(from_gpu<float>(yg), want, what);
    else
      expect_bf16_close(from_gpu<float>(yg), want, 4.0, rms(want), what);
    // Rounded where the sums are made (one device): those sums' BF16 values, bit for bit.
    Tensor yr = gpu_poisoned(DType::F32, Shape{n, d});
    gpu().moe_experts_rounded(x.gpu, id.gpu, w.gpu, eg, with_shared ? &shared.first : nullptr,
                              limit, yr);
    std::vector<float> rounded = from_gpu<float>(yg);
    for (float& v : rounded) v = flashdesk::round_bf16(v);
    expect_identical(from_gpu<float>(yr), rounded, what + ", rounded");
    if (!with_shared) return;
    // The shared expert's term first (beside the router in the model), then the routed experts
    // with it added last: the CUDA kernels where shared_expert_beside_router says so, else the
    // Backend defaults; the CPU's defaults give moe_experts' bits.
    Tensor ys = gpu().alloc(DType::F32, Shape{n, d}), ya = gpu_poisoned(DType::F32, Shape{n, d});
    gpu().moe_shared_expert(x.gpu, shared.first, limit, ys);
    gpu().moe_routed_experts_plus(x.gpu, id.gpu, w.gpu, eg, ys, limit, ya);
    expect_bf16_close(from_gpu<float>(ya), want, 4.0, rms(want), what + ", shared term ahead");
    Tensor cs = cpu().alloc(DType::F32, Shape{n, d}), ca = cpu().alloc(DType::F32, Shape{n, d});
    cpu().moe_shared_expert(x.cpu, shared.second, limit, cs);
    cpu().moe_routed_experts_plus(x.cpu, id.cpu, w.cpu, ec, cs, limit, ca);
    expect_identical(from_cpu<float>(ca), want, what + ", shared term ahead on the CPU");
  }
};

TEST_F(CudaMoeTest, RouteMatchesTheReference) {
  // The route kernel ranks each expert over the row in quads where E is a multiple of 4 (40,
  // 384), one value at a time elsewhere (42); from 64 rows a warp takes a row (100 rows).
  for (const int64_t n : {5, 100})
    for (const int64_t E : {40, 42, 384}) {
      const int64_t k = 6;
      Pair logits =
          both_f32(Shape{n, E}, random_uniform(static_cast<size_t>(n * E), 1, -4.0f, 4.0f));
      Pair bias = both_f32(Shape{E}, random_uniform(static_cast<size_t>(E), 2, -0.3f, 0.3f));
      Pair bias_img = both_f32(Shape{E}, random_uniform(static_cast<size_t>(E), 3, -0.3f, 0.3f));
      std::vector<uint8_t> image(static_cast<size_t>(n));
      for (size_t i = 0; i < image.size(); ++i) image[i] = (i % 5 == 1 || i % 5 == 2) ? 1 : 0;
      for (bool with_image : {false, true}) {
        const RouteSettings s{k, 1.3f, 2.5f, true};
        Pair ids = both_alloc(DType::I32, Shape{n, k}), w = both_alloc(DType::F32, Shape{n, k});
        const std::span<const uint8_t> rows =
            with_image ? std::span<const uint8_t>(image) : std::span<const uint8_t>();
        gpu().moe_route(logits.gpu, bias.gpu, &bias_img.gpu, rows, s, ids.gpu, w.gpu);
        cpu().moe_route(logits.cpu, bias.cpu, &bias_img.cpu, rows, s, ids.cpu, w.cpu);
        expect_identical(from_gpu<int32_t>(ids.gpu), from_cpu<int32_t>(ids.cpu),
                         "route ids, n = " + std::to_string(n) + ", E = " + std::to_string(E));
        const std::vector<float> wg = from_gpu<float>(w.gpu), wc = from_cpu<float>(w.cpu);
        for (size_t i = 0; i < wg.size(); ++i)
          EXPECT_NEAR(wg[i], wc[i], 1e-6 * std::fabs(wc[i])) << i;
      }
    }
}

// Gate logits of four distinct values and no bias: the six best tie at nearly every row, and ids
// and their order (which the normalising sum follows) must be torch's, over both of its paths
// (nth_element with 40 experts, partial_sort with 384), with a block a row (16 rows) and a warp
// (80).
TEST_F(CudaMoeTest, RouteTiesAsTorchBreaksThem) {
  for (const int64_t n : {16, 80})
    for (const int64_t E : {40, 42, 384}) {
      const int64_t k = 6;
      std::vector<float> l = random_uniform(static_cast<size_t>(n * E), 4, 0.0f, 4.0f);
      for (float& v : l) v = std::floor(v) - 1.5f;
      Pair logits = both_f32(Shape{n, E}, l);
      Pair bias = both_f32(Shape{E}, std::vector<float>(static_cast<size_t>(E), 0.0f));
      const RouteSettings s{k, 1.0f, 2.5f, true};
      Pair ids = both_alloc(DType::I32, Shape{n, k}), w = both_alloc(DType::F32, Shape{n, k});
      gpu().moe_route(logits.gpu, bias.gpu, nullptr, {}, s, ids.gpu, w.gpu);
      cpu().moe_route(logits.cpu, bias.cpu, nullptr, {}, s, ids.cpu, w.cpu);
      expect_identical(from_gpu<int32_t>(ids.gpu), from_cpu<int32_t>(ids.cpu),
                       "route ids, n = " + std::to_string(n) + ", E = " + std::to_string(E));
      const std::vector<float> wg = from_gpu<float>(w.gpu), wc = from_cpu<float>(w.cpu);
      for (size_t i = 0; i < wg.size(); ++i)
        EXPECT_NEAR(wg[i], wc[i], 1e-6 * std::fabs(wc[i])) << i;
    }
}

TEST_F(CudaMoeTest, GroupedExpertsUpToEightRows) {
  // The shared expert as a grouped slot per row (n < 3), or as GEMVs over all rows (n >= 3); on
  // the tensor cores (moe_decode_tc.cuh: the codes as FP16 products) with the FP8 shared slot in
  // two parts over K (FP8 against FP4) and in one, the down kernel's tiles split over K by two
  // warps (the default) and by four, the one-row down kernel ten blocks a multiprocessor (the
  // default) or eight (path 6), with the tiles' K units to the warps interleaved (the default) or
  // in ranges (path 5), and on the CUDA cores with the shared slot in one part and in
  // byte-balanced parts of its rows.
  for (const int path : {0, 1, 2, 3, 4, 5, 6}) {
    const bool parts = path == 2;
    gpu().set_decode_experts_tensor_cores(path == 0 || path >= 3);
    gpu().set_split_shared_expert_tc(path == 0 || path >= 4);
    gpu().set_balance_shared_expert(parts);
    gpu().set_down_split(path == 4 ? 4 : 2);
    gpu().set_down_blocks(path == 6 ? 8 : 10);
    gpu().set_interleaved_units(path != 5);
    for (int64_t n : {1, 2, 3, 8}) check_experts(n, 64, 32, 8, 2, 3, true, false, 10 + uint32_t(n));
    check_experts(2, 96, 64, 10, 3, 4, false, true, 20);  // no shared expert, absent experts
    // Partial row blocks of both kernels (inter 96 of 32 a block, dim 160 of 64), 5 chunks a row.
    check_experts(3, 160, 96, 9, 2, 3, true, true, 21);
    check_experts(1, 160, 96, 9, 2, 3, true, true, 22);
    // Shapes the tensor-core kernels take (K a multiple of 128: dim 256, inter 128; 3 quarters of
    // a tile's K units empty at inter 128), with and without the shared slot, absent experts.
    for (int64_t n : {1, 2, 3, 8})
      check_experts(n, 256, 128, 8, 2, 3, true, false, 23 + uint32_t(n));
    check_experts(2, 384, 256, 10, 3, 4, false, true, 31);
  }
  gpu().set_balance_shared_expert(false);
  gpu().set_split_shared_expert_tc(true);
  gpu().set_decode_experts_tensor_cores(true);
  gpu().set_down_split(2);
  gpu().set_down_blocks(10);
  gpu().set_interleaved_units(true);
}

// Hybrid placement: routed experts left in host memory are computed on the CPU, the shared one on
// the device, and their sum keeps the definition's order (routed in ascending id, then shared).
TEST_F(CudaMoeTest, RoutedExpertsInHostMemoryRunOnTheCpu) {
  for (int64_t n : {1, 3, 12})
    check_experts(n, 64, 32, 8, 2, 3, true, false, 40 + uint32_t(n), true);
  check_experts(2, 96, 64, 10, 3, 4, false, true, 50, true);   // no shared expert: bit-identical
  check_experts(12, 256, 64, 8, 2, 8, true, false, 60, true);  // the every-role shapes
  check_experts(1, 256, 64, 8, 2, 8, true, false, 61, true);
}

// The shared expert's term ahead of the routing (StepRunner::moe), when switched on: taken at
// decode sizes where the tensor-core kernels fit it (one or two rows), not from three rows on (it
// runs as GEMVs there); the values as moe_experts' (check_experts compares both with the CPU).
TEST_F(CudaMoeTest, SharedExpertBesideTheRouterAtDecodeSizes) {
  auto shared = expert(false, 256, 128, 90);
  EXPECT_FALSE(gpu().shared_expert_beside_router(shared.first, 1));  // off by default
  gpu().set_shared_expert_ahead(true);
  EXPECT_TRUE(gpu().shared_expert_beside_router(shared.first, 1));
  EXPECT_TRUE(gpu().shared_expert_beside_router(shared.first, 2));
  EXPECT_FALSE(gpu().shared_expert_beside_router(shared.first, 3));
  EXPECT_FALSE(cpu().shared_expert_beside_router(shared.second, 1));
  for (int64_t n : {1, 2}) check_experts(n, 256, 128, 8, 2, 3, true, false, 91 + uint32_t(n));
  check_experts(1, 256, 128, 8, 2, 3, true, false, 95, true);  // routed experts in host memory
  gpu().set_shared_expert_ahead(false);
  EXPECT_FALSE(gpu().shared_expert_beside_router(shared.first, 1));
}

TEST_F(CudaMoeTest, PerExpertGemmsBeyondEightRows) {
  check_experts(12, 64, 32, 8, 2, 3, true, true, 30);
}

// Prefill-sized steps with FP4 experts of dim a multiple of 128 and inter of 64: the routed
// experts in one launch per stage on the tensor cores (moe_grouped.h), tiles of up to 128 rows of
// an expert (150 rows x top-2 of 4 experts: 75 rows an expert, one tile whose second half of
// warps has rows; 150 rows x both of 2 experts: a full tile and a partial one), CTAs of four column
// warps (dim 128 or 384) and of eight (dim a multiple of 256, inter of 128); on Hopper with the
// wgmma kernels (moe_grouped_sm90a.cu: CTAs of 256 weight rows where dim is a multiple of 256
// and inter of 128, else of 128; then of 128 only; a tile's second row half of warpgroups without
// rows at 75; products sized to a tile's pairs, or over all its rows) and with the mma.sync ones;
// then the per-expert cuBLAS products the kernels replace.
TEST_F(CudaMoeTest, PrefillExpertsOnTheTensorCores) {
  const CudaDeviceInfo& device = cuda_devices().front();
  const bool hopper = device.major == 9 && device.minor == 0;
  using W = CudaBackend::WgmmaExperts;
  for (const W wgmma : {W::Auto, W::Narrow, W::Off}) {
    gpu().set_wgmma_experts(wgmma);
    // A Hopper GPU runs the wgmma kernels when they are asked for: a build without their sm_90a
    // object would fall back to the mma.sync kernels silently.
    EXPECT_EQ(gpu().wgmma_experts_run(), wgmma != W::Off && (emulated() || hopper));
    // flash-tiny's shapes: 10 pairs an expert (the wgmma kernels' 32-pair products), then 75.
    check_experts(40, 256, 128, 8, 2, 8, true, false, 70);
    check_experts(300, 256, 128, 8, 2, 8, true, false, 75);
    check_experts(150, 128, 64, 4, 2, 4, true, false, 71);
    check_experts(150, 384, 192, 2, 2, 2, true, false, 73);
    check_experts(150, 512, 256, 2, 2, 2, true, false, 74);
    check_experts(150, 128, 64, 4, 2, 4, false, false, 72);  // no shared expert
    // 178 pairs an expert: a full tile and one of 50 (the wgmma kernels' 64-pair products; 75
    // and 150's last 22 take those of 96 and 32).
    check_experts(178, 256, 128, 2, 2, 2, true, false, 76);
  }
  // The wgmma kernels' products over every row of each tile.
  gpu().set_wgmma_fitted_products(false);
  check_experts(300, 256, 128, 8, 2, 8, true, false, 75);
  check_experts(178, 256, 128, 2, 2, 2, true, false, 76);
  gpu().set_wgmma_fitted_products(true);
  gpu().set_wgmma_experts(W::Auto);
  gpu().set_grouped_moe(false);
  check_experts(40, 256, 128, 8, 2, 8, true, false, 70);
  gpu().set_grouped_moe(true);
}

TEST_F(CudaMoeTest, FullShapes) {
  FD_REQUIRE_FULL_SHAPES();
  check_experts(200, 5120, 2304, 384, 6, 8, true, false, 43);  // the tensor-core kernels
  // 75 pairs an expert: on Hopper the wgmma kernels' wide form at V4.1's dims.
  check_experts(100, 5120, 2304, 8, 6, 8, true, false, 44);
  check_experts(1, 5120, 2304, 384, 6, 4, true, false, 40);
  check_experts(8, 5120, 2304, 384, 6, 4, true, false, 42);  // the shared expert as GEMVs
  check_experts(12, 5120, 2304, 384, 6, 4, true, false, 41);
  gpu().set_interleaved_units(false);  // the tiles' K units to the warps in ranges
  check_experts(1, 5120, 2304, 384, 6, 4, true, false, 40);
  gpu().set_interleaved_units(true);
  gpu().set_down_blocks(8);  // the one-row down kernel eight blocks a multiprocessor
  check_experts(1, 5120, 2304, 384, 6, 4, true, false, 40);
  gpu().set_down_blocks(10);
  gpu().set_decode_experts_tensor_cores(false);  // the CUDA-core decode kernels
  check_experts(1, 5120, 2304, 384, 6, 4, true, false, 40);
  check_experts(8, 5120, 2304, 384, 6, 4, true, false, 42);
  gpu().set_decode_experts_tensor_cores(true);
}

}  // namespace
}  // namespace flashdesk::test
