// The ops the vision tower and aligner need beyond the text backend interface (backend.h):
// biased linears, residual adds, SwiGLU and GELU activations, 2D rotate-half RoPE with dense
// bidirectional attention, and the aligner's pixel-unshuffle (docs/model-spec.md §8).
//
// Goals: the DeepSeek-ViT forward written once against an interface, like the text model, so a
// device backend plugs in by implementing these six ops beside its Backend. They live in their
// own interface so text-only backends and the widely included backend.h stay unchanged.
// Numerics: tensors are F32 holding bf16-rounded values where the reference holds BF16; every
// op states where it rounds. Non-goals: general broadcasting, masks, causal attention.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "engine/ops/backend.h"

namespace flashdesk {

class VisionOps {
 public:
  virtual ~VisionOps() = default;
  virtual std::string_view name() const = 0;

  // y [n, d] = bf16(y + bias) per row; y is a linear's FP32 output, bias [d] F32.
  virtual void add_bias_bf16(Tensor& y, const Tensor& bias) = 0;
  // x = bf16(x + y), same shapes (the residual add).
  virtual void add_bf16(Tensor& x, const Tensor& y) = 0;
  // out [n, I] = bf16(silu(g) * u) in FP32, gu [n, 2I] = [g | u] per row.
  virtual void swiglu_bf16(const Tensor& gu, Tensor& out) = 0;
  // x = bf16(gelu(x)), the exact (erf) GELU in FP32.
  virtual void gelu_bf16(Tensor& x) = 0;
  // Bidirectional attention over the P patches of one image. qkv [P, 3*H*hd] holds per row
  // [q (H x hd) | k | v]; q and k get the rotate-half RoPE over the whole head in FP32
  // ([x1 cos - x2 sin, x2 cos + x1 sin] with x1 = x[:hd/2], x2 = x[hd/2:]) from cos/sin
  // [P, hd/2] (host); scores q.k * scale and softmax in FP32, out [P, H*hd] = bf16(softmax . v).
  virtual void vit_attention(const Tensor& qkv, int64_t heads, std::span<const float> cos,
                             std::span<const float> sin, float scale, Tensor& out) = 0;
  // The aligner's r x r unshuffle: feats [n_h*n_w, d] (row-major grid), zero-padded bottom and
  // right to multiples of r, -> out [ceil(n_h/r)*ceil(n_w/r), d*r*r], cells row-major, each cell
  // ordered channel-major (c*r*r + kh*r + kw).
  virtual void pixel_unshuffle(const Tensor& feats, int64_t n_h, int64_t n_w, int64_t r,
                               Tensor& out) = 0;
};

// The vision ops for `backend`: the CPU implementation (on the backend's thread pool) for the
// CPU backends, the CUDA one (on the backend's stream) for a CUDA backend; InvalidRequest for a
// backend without them. `backend` must outlive the result.
std::unique_ptr<VisionOps> make_vision_ops(Backend& backend);

// Each implementation's factory (vision_ops.cpp asks them in turn): null when `backend` is not
// one of its kind (the CUDA one also in a build without CUDA).
std::unique_ptr<VisionOps> make_cpu_vision_ops(Backend& backend);
std::unique_ptr<VisionOps> make_cuda_vision_ops(Backend& backend);

}  // namespace flashdesk
