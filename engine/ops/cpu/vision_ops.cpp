// The CPU implementation of the vision ops (engine/ops/vision_ops.h): plain loops over rows on
// the CPU backend's thread pool; each output is computed by one thread in a fixed order.
#include "engine/ops/vision_ops.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/ops/cpu/cpu_backend.h"
#include "engine/util/numeric.h"

namespace flashdesk {
namespace {

class CpuVisionOps : public VisionOps {
 public:
  explicit CpuVisionOps(ThreadPool& pool) : pool_(pool) {}
  std::string_view name() const override { return "cpu"; }

  void add_bias_bf16(Tensor& y, const Tensor& bias) override {
    const int64_t d = bias.numel(), n = y.numel() / std::max<int64_t>(d, 1);
    FD_CHECK(d > 0 && n * d == y.numel(),
             "add_bias_bf16: y " + y.shape().str() + ", bias " + bias.shape().str());
    float* yd = y.data<float>();
    const float* b = bias.data<float>();
    pool_.parallel_for(n, 16, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        for (int64_t j = 0; j < d; ++j) yd[i * d + j] = round_bf16(yd[i * d + j] + b[j]);
    });
  }

  void add_bf16(Tensor& x, const Tensor& y) override {
    FD_CHECK(x.shape() == y.shape(), "add_bf16: " + x.shape().str() + " vs " + y.shape().str());
    float* xd = x.data<float>();
    const float* yd = y.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) xd[i] = round_bf16(xd[i] + yd[i]);
  }

  void swiglu_bf16(const Tensor& gu, Tensor& out) override {
    const int64_t n = gu.rows(), inter = out.shape().row_numel();
    FD_CHECK(out.rows() == n && gu.shape().row_numel() == 2 * inter,
             "swiglu_bf16: gu " + gu.shape().str() + ", out " + out.shape().str());
    const float* g = gu.data<float>();
    float* o = out.data<float>();
    pool_.parallel_for(n, 8, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        for (int64_t j = 0; j < inter; ++j) {
          const float gate = g[i * 2 * inter + j], up = g[i * 2 * inter + inter + j];
          o[i * inter + j] = round_bf16(gate / (1.0f + std::exp(-gate)) * up);
        }
    });
  }

  void gelu_bf16(Tensor& x) override {
    float* d = x.data<float>();
    pool_.parallel_for(x.numel(), 4096, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        d[i] = round_bf16(0.5f * d[i] * (1.0f + std::erf(d[i] * 0.70710678118654752f)));
    });
  }

  void vit_attention(const Tensor& qkv, int64_t heads, std::span<const float> cos,
                     std::span<const float> sin, float scale, Tensor& out) override;

  void pixel_unshuffle(const Tensor& feats, int64_t n_h, int64_t n_w, int64_t r,
                       Tensor& out) override {
    const int64_t d = feats.shape().row_numel(), H3 = (n_h + r - 1) / r, W3 = (n_w + r - 1) / r;
    FD_CHECK(feats.rows() == n_h * n_w, "pixel_unshuffle: feats " + feats.shape().str());
    check_shape(out, Shape{H3 * W3, d * r * r}, "pixel_unshuffle out");
    const float* f = feats.data<float>();
    float* o = out.data<float>();
    for (int64_t cy = 0; cy < H3; ++cy)
      for (int64_t cx = 0; cx < W3; ++cx) {
        float* cell = o + (cy * W3 + cx) * d * r * r;
        for (int64_t kh = 0; kh < r; ++kh)
          for (int64_t kw = 0; kw < r; ++kw) {
            const int64_t y = cy * r + kh, x = cx * r + kw;
            const bool inside = y < n_h && x < n_w;
            for (int64_t c = 0; c < d; ++c)
              cell[c * r * r + kh * r + kw] = inside ? f[(y * n_w + x) * d + c] : 0.0f;
          }
      }
  }

 private:
  ThreadPool& pool_;
};

// q or k of one head with the rotate-half RoPE of its patch, FP32.
void rope_half(const float* x, const float* cs, const float* sn, int64_t hd, float* y) {
  const int64_t h = hd / 2;
  for (int64_t i = 0; i < h; ++i) {
    y[i] = x[i] * cs[i] - x[i + h] * sn[i];
    y[i + h] = x[i + h] * cs[i] + x[i] * sn[i];
  }
}

// q . k in FP32 with 8 interleaved partial sums (lane j sums i = j mod 8), then added in
// order: vectorisable without reassociation flags; hd is a multiple of 2, the tail is scalar.
float dot8(const float* a, const float* b, int64_t n) {
  float part[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) part[j] += a[i + j] * b[i + j];
  float sum = 0.0f;
  for (int j = 0; j < 8; ++j) sum += part[j];
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

void CpuVisionOps::vit_attention(const Tensor& qkv, int64_t heads, std::span<const float> cos,
                                 std::span<const float> sin, float scale, Tensor& out) {
  const int64_t P = qkv.rows(), dim = out.shape().row_numel(), hd = dim / heads;
  FD_CHECK(heads > 0 && hd * heads == dim && hd % 2 == 0 && qkv.shape().row_numel() == 3 * dim &&
               out.rows() == P,
           "vit_attention: qkv " + qkv.shape().str() + ", out " + out.shape().str());
  FD_CHECK(static_cast<int64_t>(cos.size()) == P * hd / 2 && sin.size() == cos.size(),
           "vit_attention: cos/sin need [P, hd/2]");
  const float* src = qkv.data<float>();
  // Rotated q and k per head: [H, P, hd] FP32.
  std::vector<float> q(static_cast<size_t>(heads * P * hd)), k(q.size());
  pool_.parallel_for(P, 16, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p)
      for (int64_t h = 0; h < heads; ++h) {
        const float* cs = cos.data() + p * hd / 2;
        const float* sn = sin.data() + p * hd / 2;
        rope_half(src + p * 3 * dim + h * hd, cs, sn, hd, q.data() + (h * P + p) * hd);
        rope_half(src + p * 3 * dim + dim + h * hd, cs, sn, hd, k.data() + (h * P + p) * hd);
      }
  });
  float* o = out.data<float>();
  pool_.parallel_for(heads * P, 4, [&](int64_t begin, int64_t end) {
    std::vector<float> score(static_cast<size_t>(P)), acc(static_cast<size_t>(hd));
    for (int64_t hp = begin; hp < end; ++hp) {
      const int64_t h = hp / P, p = hp % P;
      const float* qv = q.data() + (h * P + p) * hd;
      float mx = -INFINITY;
      for (int64_t s = 0; s < P; ++s) {
        score[static_cast<size_t>(s)] = dot8(qv, k.data() + (h * P + s) * hd, hd) * scale;
        mx = std::max(mx, score[static_cast<size_t>(s)]);
      }
      float sum = 0.0f;
      for (float& s : score) sum += (s = std::exp(s - mx));
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t s = 0; s < P; ++s) {
        const float w = score[static_cast<size_t>(s)] / sum;
        const float* v = src + s * 3 * dim + 2 * dim + h * hd;
        for (int64_t i = 0; i < hd; ++i) acc[static_cast<size_t>(i)] += w * v[i];
      }
      for (int64_t i = 0; i < hd; ++i)
        o[p * dim + h * hd + i] = round_bf16(acc[static_cast<size_t>(i)]);
    }
  });
}

}  // namespace

std::unique_ptr<VisionOps> make_cpu_vision_ops(Backend& backend) {
  if (auto* cpu = dynamic_cast<CpuReferenceBackend*>(&backend))
    return std::make_unique<CpuVisionOps>(cpu->pool());
  return nullptr;
}

}  // namespace flashdesk
