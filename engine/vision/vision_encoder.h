// DeepSeek-ViT and the aligner (docs/model-spec.md §8): preprocessed patches -> ViT features ->
// aligner rows -> the embeddings of a whole image span (IMAGE_START, rows of cells each ended by
// IMAGE_NEW_LINE, IMAGE_END), written once against the backend and vision op interfaces.
//
// Numerics follow tools/train/vision.py (the demo model's trainer): activations bf16 between
// ops, linears with FP32 accumulation (bias added in FP32 before the bf16 rounding), RMSNorm in
// FP32, attention (rotate-half 2D RoPE, softmax) in FP32, SwiGLU and exact GELU in FP32.
// Non-goals: batching several images through one call, sharding the tower across devices.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/ops/backend.h"
#include "engine/ops/vision_ops.h"
#include "engine/vision/image_preprocess.h"

namespace flashdesk {

struct VitBlockWeights {
  Tensor norm1, norm2;  // [d] F32
  LinearWeight wqkv;    // [3d, d] BF16
  Tensor wqkv_bias;     // [3d]
  LinearWeight wo;      // [d, d]
  Tensor wo_bias;       // [d]
  LinearWeight w1;      // [2I, d] gate || up
  LinearWeight w2;      // [d, I]
};

struct VisionWeights {
  LinearWeight patch_embed;  // [d, 3 p^2]
  Tensor patch_bias;         // [d]
  std::vector<VitBlockWeights> blocks;
  Tensor norm;              // [d]
  LinearWeight aligner_w1;  // [dim, d r^2]
  Tensor aligner_b1;        // [dim]
  LinearWeight aligner_w2;  // [dim, dim]
  Tensor aligner_b2;        // [dim]
  Tensor delimiters;        // [3, dim] F32: image_start, image_newline, image_end
};

class VisionEncoder {
 public:
  // Uploads the tower, aligner and delimiter vectors of `checkpoint` (which must have a
  // vision_config: InvalidRequest otherwise) to `backend`; both must outlive the encoder.
  VisionEncoder(const Checkpoint& checkpoint, Backend& backend);
  ~VisionEncoder();

  const VisionConfig& config() const { return vc_; }

  // ViT features [vit_h * vit_w, d] after the final norm.
  Tensor features(const PreprocessedImage& image);
  // Aligner rows [grid.rows * grid.cols, dim] in reading order.
  Tensor align(const Tensor& features, const PreprocessedImage& image);
  // The whole span [grid.token_count(), dim]: what Model::prefill takes as ImageEmbedding rows.
  Tensor span_rows(const Tensor& aligned, const ImageGrid& grid);
  // features -> align -> span_rows.
  Tensor encode(const PreprocessedImage& image);

 private:
  Tensor linear(const Tensor& x, const LinearWeight& w, const Tensor* bias);
  void block(Tensor& x, const VitBlockWeights& b, const PreprocessedImage& image);

  Backend& be_;
  std::unique_ptr<VisionOps> ops_;
  VisionConfig vc_;
  int64_t dim_ = 0;  // LLM hidden size
  VisionWeights w_;
  // RoPE tables of the last image size: cos/sin [P, hd/2].
  int64_t rope_h_ = -1, rope_w_ = -1;
  std::vector<float> cos_, sin_;
};

// cos/sin [n_h * n_w, head_dim / 2] of the ViT's 2D RoPE: patch (row, col) has the phases
// [row * inv_freq (head_dim/4), col * inv_freq (head_dim/4)], inv_freq_i = theta^(-4i/head_dim).
void vit_rope_tables(int64_t head_dim, double theta, int64_t n_h, int64_t n_w,
                     std::vector<float>& cos, std::vector<float>& sin);

}  // namespace flashdesk
