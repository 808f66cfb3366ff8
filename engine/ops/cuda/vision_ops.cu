// The vision ops (engine/ops/vision_ops.h) on the CUDA backend's stream, so an image's ViT and
// aligner run on the GPU with the text model (their linears and norms are the Backend's own).
// Element-wise ops round as the CPU implementation does (products and sums kept apart with
// __fmul_rn / __fadd_rn, so they are bit-identical up to expf / erff); the ViT attention is one
// block per (patch, head): scores into shared memory, max and sum over the block, then the value
// sum split over column groups: it differs from the CPU's only in the order of its FP32 sums.
#include <string>

#include "engine/ops/cuda/cuda_backend.h"
#include "engine/ops/cuda/device_context.h"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/vision_ops.h"
#include "engine/util/error.h"

namespace flashdesk {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kAttnThreads = 128;
constexpr int64_t kAttnSharedBytes = 48 * 1024;  // without opting in to more per block

__global__ void add_bias_bf16_kernel(float* y, const float* bias, int64_t n, int64_t d) {
  FD_GRID_PROLOGUE();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = round_bf16(__fadd_rn(y[i], bias[i % d]));
}

__global__ void add_bf16_kernel(float* x, const float* y, int64_t n) {
  FD_GRID_PROLOGUE();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = round_bf16(__fadd_rn(x[i], y[i]));
}

__global__ void swiglu_bf16_kernel(const float* gu, int64_t n, int64_t inter, float* out) {
  FD_GRID_PROLOGUE();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * inter) return;
  const int64_t row = i / inter, j = i % inter;
  const float gate = gu[row * 2 * inter + j], up = gu[row * 2 * inter + inter + j];
  out[i] = round_bf16(__fmul_rn(gate / __fadd_rn(1.0f, expf(-gate)), up));  // IEEE division
}

__global__ void gelu_bf16_kernel(float* x, int64_t n) {
  FD_GRID_PROLOGUE();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  const float e = erff(__fmul_rn(v, 0.70710678118654752f));
  x[i] = round_bf16(__fmul_rn(__fmul_rn(0.5f, v), __fadd_rn(1.0f, e)));
}

// One thread per (patch, head, pair i < hd/2): the rotate-half RoPE of q and k, FP32, into
// [heads, P, hd] (the layout the attention kernel reads).
__global__ void vit_rope_kernel(const float* qkv, const float* cos, const float* sin, int64_t P,
                                int64_t heads, int64_t hd, float* q, float* k) {
  FD_GRID_PROLOGUE();
  const int64_t half = hd / 2, dim = heads * hd;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= P * heads * half) return;
  const int64_t i = idx % half, h = (idx / half) % heads, p = idx / (half * heads);
  const float c = cos[p * half + i], s = sin[p * half + i];
  for (int m = 0; m < 2; ++m) {  // q, then k
    const float* x = qkv + p * 3 * dim + m * dim + h * hd;
    float* y = (m == 0 ? q : k) + (h * P + p) * hd;
    y[i] = __fsub_rn(__fmul_rn(x[i], c), __fmul_rn(x[i + half], s));
    y[i + half] = __fadd_rn(__fmul_rn(x[i + half], c), __fmul_rn(x[i], s));
  }
}

// grid (P, heads): out[p, h*hd + i] = bf16(sum_s softmax_s(q_p . k_s * scale) v_s[i]) in FP32.
// Shared memory: q (hd), the scores (P), the value sum's partials (blockDim.x).
__global__ void __launch_bounds__(kAttnThreads)
    vit_attention_kernel(const float* q, const float* k, const float* qkv, int64_t P, int64_t heads,
                         int64_t hd, float scale, float* out) {
  FD_GRID_PROLOGUE();
  FD_DYNAMIC_SMEM(float, smem);
  __shared__ float red[32];
  float* qs = smem;
  float* sc = qs + hd;
  float* part = sc + P;
  const int64_t p = blockIdx.x, h = blockIdx.y, dim = heads * hd;
  const int t = static_cast<int>(threadIdx.x), threads = static_cast<int>(blockDim.x);
  for (int64_t i = t; i < hd; i += threads) qs[i] = q[(h * P + p) * hd + i];
  __syncthreads();
  float mx = -INFINITY;
  for (int64_t s = t; s < P; s += threads) {
    const float* ks = k + (h * P + s) * hd;
    float d = 0.0f;
    for (int64_t i = 0; i < hd; ++i) d += qs[i] * ks[i];
    sc[s] = d * scale;
    mx = fmaxf(mx, sc[s]);
  }
  mx = block_max(mx, red);
  float sum = 0.0f;
  for (int64_t s = t; s < P; s += threads) {
    const float e = expf(sc[s] - mx);
    sc[s] = e;
    sum += e;
  }
  sum = block_sum(sum, red);  // its barriers also publish sc
  // The value sum: `cols` columns at a time, each split over `chunks` interleaved runs of s.
  const int64_t cols = hd < threads ? hd : threads;
  const int64_t chunks = threads / cols;
  for (int64_t i0 = 0; i0 < hd; i0 += cols) {
    const int64_t i = i0 + t % cols, c = t / cols;
    float acc = 0.0f;
    if (c < chunks && i < hd)
      for (int64_t s = c; s < P; s += chunks)
        acc += (sc[s] / sum) * qkv[s * 3 * dim + 2 * dim + h * hd + i];
    part[t] = acc;
    __syncthreads();
    if (t < cols && i < hd) {
      float total = 0.0f;
      for (int64_t j = 0; j < chunks; ++j) total += part[j * cols + t];
      out[p * dim + h * hd + i] = round_bf16(total);
    }
    __syncthreads();
  }
}

// One thread per output value of the r x r unshuffle (vision_ops.h).
__global__ void pixel_unshuffle_kernel(const float* f, int64_t n_h, int64_t n_w, int64_t r,
                                       int64_t d, int64_t W3, int64_t total, float* o) {
  FD_GRID_PROLOGUE();
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= total) return;
  const int64_t per_cell = d * r * r, cell = idx / per_cell, j = idx % per_cell;
  const int64_t c = j / (r * r), kh = (j / r) % r, kw = j % r;
  const int64_t y = (cell / W3) * r + kh, x = (cell % W3) * r + kw;
  o[idx] = (y < n_h && x < n_w) ? f[(y * n_w + x) * d + c] : 0.0f;
}

class CudaVisionOps : public VisionOps {
 public:
  explicit CudaVisionOps(CudaBackend& be) : be_(be) {}
  std::string_view name() const override { return be_.name(); }

  void add_bias_bf16(Tensor& y, const Tensor& bias) override {
    const int64_t d = bias.numel(), n = y.numel();
    FD_CHECK(d > 0 && n % d == 0,
             "add_bias_bf16: y " + y.shape().str() + ", bias " + bias.shape().str());
    check_dtype(y, DType::F32, "add_bias_bf16 y");
    check_dtype(bias, DType::F32, "add_bias_bf16 bias");
    DeviceGuard g(ctx().device());
    FD_LAUNCH(add_bias_bf16_kernel, dim3(blocks_for(n, kThreads)), dim3(kThreads), 0,
              ctx().stream(), ptr<float>(y), ptr<const float>(bias), n, d);
  }

  void add_bf16(Tensor& x, const Tensor& y) override {
    FD_CHECK(x.shape() == y.shape(), "add_bf16: " + x.shape().str() + " vs " + y.shape().str());
    check_dtype(x, DType::F32, "add_bf16 x");
    check_dtype(y, DType::F32, "add_bf16 y");
    DeviceGuard g(ctx().device());
    FD_LAUNCH(add_bf16_kernel, dim3(blocks_for(x.numel(), kThreads)), dim3(kThreads), 0,
              ctx().stream(), ptr<float>(x), ptr<const float>(y), x.numel());
  }

  void swiglu_bf16(const Tensor& gu, Tensor& out) override {
    const int64_t n = gu.rows(), inter = out.shape().row_numel();
    FD_CHECK(out.rows() == n && gu.shape().row_numel() == 2 * inter,
             "swiglu_bf16: gu " + gu.shape().str() + ", out " + out.shape().str());
    check_dtype(gu, DType::F32, "swiglu_bf16 gu");
    check_dtype(out, DType::F32, "swiglu_bf16 out");
    DeviceGuard g(ctx().device());
    FD_LAUNCH(swiglu_bf16_kernel, dim3(blocks_for(n * inter, kThreads)), dim3(kThreads), 0,
              ctx().stream(), ptr<const float>(gu), n, inter, ptr<float>(out));
  }

  void gelu_bf16(Tensor& x) override {
    check_dtype(x, DType::F32, "gelu_bf16 x");
    DeviceGuard g(ctx().device());
    FD_LAUNCH(gelu_bf16_kernel, dim3(blocks_for(x.numel(), kThreads)), dim3(kThreads), 0,
              ctx().stream(), ptr<float>(x), x.numel());
  }

  void vit_attention(const Tensor& qkv, int64_t heads, std::span<const float> cos,
                     std::span<const float> sin, float scale, Tensor& out) override {
    const int64_t P = qkv.rows(), dim = out.shape().row_numel();
    const int64_t hd = heads > 0 ? dim / heads : 0;
    FD_CHECK(heads > 0 && hd * heads == dim && hd % 2 == 0 && qkv.shape().row_numel() == 3 * dim &&
                 out.rows() == P,
             "vit_attention: qkv " + qkv.shape().str() + ", out " + out.shape().str());
    FD_CHECK(static_cast<int64_t>(cos.size()) == P * hd / 2 && sin.size() == cos.size(),
             "vit_attention: cos/sin need [P, hd/2]");
    check_dtype(qkv, DType::F32, "vit_attention qkv");
    check_dtype(out, DType::F32, "vit_attention out");
    const int64_t smem = (hd + P + kAttnThreads) * static_cast<int64_t>(sizeof(float));
    if (smem > kAttnSharedBytes)  // a model allowing more image tokens than V4.1's 1,024
      throw InvalidRequest("vit_attention: " + std::to_string(P) + " patches of head size " +
                           std::to_string(hd) +
                           " need more shared memory than one block has on CUDA; use a CPU "
                           "backend or fewer image tokens");
    if (P == 0) return;
    DeviceGuard g(ctx().device());
    Tensor cs = ctx().upload_span(cos, DType::F32), sn = ctx().upload_span(sin, DType::F32);
    Tensor q = ctx().scratch(DType::F32, Shape{heads, P, hd});
    Tensor k = ctx().scratch(DType::F32, Shape{heads, P, hd});
    FD_LAUNCH(vit_rope_kernel, dim3(blocks_for(P * heads * (hd / 2), kThreads)), dim3(kThreads), 0,
              ctx().stream(), ptr<const float>(qkv), ptr<const float>(cs), ptr<const float>(sn), P,
              heads, hd, ptr<float>(q), ptr<float>(k));
    FD_LAUNCH(vit_attention_kernel, dim3(static_cast<unsigned>(P), static_cast<unsigned>(heads)),
              dim3(kAttnThreads), static_cast<size_t>(smem), ctx().stream(), ptr<const float>(q),
              ptr<const float>(k), ptr<const float>(qkv), P, heads, hd, scale, ptr<float>(out));
  }

  void pixel_unshuffle(const Tensor& feats, int64_t n_h, int64_t n_w, int64_t r,
                       Tensor& out) override {
    FD_CHECK(r > 0, "pixel_unshuffle: r must be positive");
    const int64_t d = feats.shape().row_numel(), H3 = (n_h + r - 1) / r, W3 = (n_w + r - 1) / r;
    FD_CHECK(feats.rows() == n_h * n_w, "pixel_unshuffle: feats " + feats.shape().str());
    check_shape(out, Shape{H3 * W3, d * r * r}, "pixel_unshuffle out");
    const int64_t total = out.numel();
    if (total == 0) return;
    DeviceGuard g(ctx().device());
    FD_LAUNCH(pixel_unshuffle_kernel, dim3(blocks_for(total, kThreads)), dim3(kThreads), 0,
              ctx().stream(), ptr<const float>(feats), n_h, n_w, r, d, W3, total, ptr<float>(out));
  }

 private:
  DeviceContext& ctx() { return be_.context(); }
  CudaBackend& be_;
};

}  // namespace
}  // namespace cuda

std::unique_ptr<VisionOps> make_cuda_vision_ops(Backend& backend) {
  if (auto* gpu = dynamic_cast<CudaBackend*>(&backend))
    return std::make_unique<cuda::CudaVisionOps>(*gpu);
  return nullptr;
}

}  // namespace flashdesk
