// The CUDA vision ops (engine/ops/cuda/vision_ops.cu) against the CPU ones on random inputs: the
// element-wise ops within 1 BF16 ulp (expf / erff against libm), the unshuffle bit-identical, the
// ViT attention within 2 ulps (FP32 sums in another order), at small shapes with awkward sizes and
// at the V4.1 tower's (16 heads x 64, up to 9,216 patches: 1,024 image tokens of 3 x 3 patches).
#include <cmath>
#include <memory>
#include <vector>

#include "engine/ops/vision_ops.h"
#include "tests/cuda/cuda_test_util.h"

namespace flashdesk::test {
namespace {

class CudaVisionOpsTest : public CudaOpTest {
 protected:
  void SetUp() override {
    CudaOpTest::SetUp();
    if (IsSkipped()) return;
    gpu_ops_ = make_vision_ops(gpu());
    cpu_ops_ = make_vision_ops(cpu());
  }

  // cos/sin of the ViT's 2D RoPE shape: [P, hd/2] angles from a patch grid.
  static void phases(int64_t P, int64_t hd, std::vector<float>& cs, std::vector<float>& sn) {
    cs.resize(static_cast<size_t>(P * hd / 2));
    sn.resize(cs.size());
    for (int64_t p = 0; p < P; ++p)
      for (int64_t i = 0; i < hd / 2; ++i) {
        const double a = static_cast<double>(p % 37 + i) * std::pow(10000.0, -2.0 * i / hd);
        cs[static_cast<size_t>(p * hd / 2 + i)] = static_cast<float>(std::cos(a));
        sn[static_cast<size_t>(p * hd / 2 + i)] = static_cast<float>(std::sin(a));
      }
  }

  void attention(int64_t P, int64_t heads, int64_t hd, uint32_t seed) {
    const int64_t dim = heads * hd;
    Pair qkv = both_f32(Shape{P, 3 * dim}, random_bf16(static_cast<size_t>(P * 3 * dim), seed));
    std::vector<float> cs, sn;
    phases(P, hd, cs, sn);
    Pair out = both_alloc(DType::F32, Shape{P, dim});
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    gpu_ops_->vit_attention(qkv.gpu, heads, cs, sn, scale, out.gpu);
    cpu_ops_->vit_attention(qkv.cpu, heads, cs, sn, scale, out.cpu);
    expect_bf16_close(from_gpu<float>(out.gpu), from_cpu<float>(out.cpu), 2.0, 1e-3,
                      "vit_attention P=" + std::to_string(P) + " H=" + std::to_string(heads) +
                          " hd=" + std::to_string(hd));
  }

  std::unique_ptr<VisionOps> gpu_ops_, cpu_ops_;
};

TEST_F(CudaVisionOpsTest, ElementwiseOpsRoundAsTheCpu) {
  const int64_t n = 37, d = 70;
  {
    Pair y = both_f32(Shape{n, d}, random_uniform(static_cast<size_t>(n * d), 1, -3, 3));
    Pair b = both_f32(Shape{d}, random_bf16(static_cast<size_t>(d), 2));
    gpu_ops_->add_bias_bf16(y.gpu, b.gpu);
    cpu_ops_->add_bias_bf16(y.cpu, b.cpu);
    expect_identical(from_gpu<float>(y.gpu), from_cpu<float>(y.cpu), "add_bias_bf16");
  }
  {
    Pair x = both_f32(Shape{n, d}, random_bf16(static_cast<size_t>(n * d), 3));
    Pair y = both_f32(Shape{n, d}, random_bf16(static_cast<size_t>(n * d), 4));
    gpu_ops_->add_bf16(x.gpu, y.gpu);
    cpu_ops_->add_bf16(x.cpu, y.cpu);
    expect_identical(from_gpu<float>(x.gpu), from_cpu<float>(x.cpu), "add_bf16");
  }
  {
    Pair gu = both_f32(Shape{n, 2 * d}, random_bf16(static_cast<size_t>(n * 2 * d), 5, 3.0f));
    Pair out = both_alloc(DType::F32, Shape{n, d});
    gpu_ops_->swiglu_bf16(gu.gpu, out.gpu);
    cpu_ops_->swiglu_bf16(gu.cpu, out.cpu);
    expect_bf16_close(from_gpu<float>(out.gpu), from_cpu<float>(out.cpu), 1.0, 1e-6, "swiglu_bf16");
  }
  {
    Pair x = both_f32(Shape{n, d}, random_bf16(static_cast<size_t>(n * d), 6, 3.0f));
    gpu_ops_->gelu_bf16(x.gpu);
    cpu_ops_->gelu_bf16(x.cpu);
    // x (1 + erf(x/√2)) / 2 cancels for x below about -3: CUDA's erff and glibc's differ by an
    // FP32 ulp of 1 there (seen on the H200: 1.6e-7 apart at -3e-7), so outputs are judged at the
    // scale 1e-4 at least, where that is a third of a BF16 ulp.
    expect_bf16_close(from_gpu<float>(x.gpu), from_cpu<float>(x.cpu), 1.0, 1e-4, "gelu_bf16");
  }
}

TEST_F(CudaVisionOpsTest, PixelUnshuffleIsTheSameLayout) {
  for (const auto& [n_h, n_w, r] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {6, 9, 3}, {7, 5, 3}, {4, 4, 2}, {1, 1, 3}}) {
    const int64_t d = 5, H3 = (n_h + r - 1) / r, W3 = (n_w + r - 1) / r;
    Pair f = both_f32(Shape{n_h * n_w, d}, random_bf16(static_cast<size_t>(n_h * n_w * d), 7));
    Pair out = both_alloc(DType::F32, Shape{H3 * W3, d * r * r});
    Tensor poisoned = gpu_poisoned(DType::F32, Shape{H3 * W3, d * r * r});
    gpu_ops_->pixel_unshuffle(f.gpu, n_h, n_w, r, poisoned);
    cpu_ops_->pixel_unshuffle(f.cpu, n_h, n_w, r, out.cpu);
    expect_identical(from_gpu<float>(poisoned), from_cpu<float>(out.cpu),
                     "pixel_unshuffle " + std::to_string(n_h) + "x" + std::to_string(n_w));
  }
}

TEST_F(CudaVisionOpsTest, VitAttentionSmallShapes) {
  attention(1, 1, 2, 11);
  attention(22, 3, 10, 12);   // head size not a multiple of 32
  attention(130, 2, 64, 13);  // more patches than threads
  attention(9, 1, 200, 14);   // head size above the block's threads
}

TEST_F(CudaVisionOpsTest, VitAttentionAtTheTowersShapes) {
  FD_REQUIRE_FULL_SHAPES();
  attention(9 * 110, 16, 64, 21);
  attention(9216, 16, 64, 22);  // 1,024 image tokens, the tower's largest input
}

TEST_F(CudaVisionOpsTest, TooManyPatchesForOneBlockSaySo) {
  const int64_t P = 20000, heads = 1, hd = 2;
  Tensor qkv = gpu().alloc(DType::F32, Shape{P, 3 * heads * hd});
  Tensor out = gpu().alloc(DType::F32, Shape{P, heads * hd});
  std::vector<float> cs(static_cast<size_t>(P * hd / 2), 1.0f), sn(cs.size(), 0.0f);
  try {
    gpu_ops_->vit_attention(qkv, heads, cs, sn, 1.0f, out);
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("shared memory"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace flashdesk::test
