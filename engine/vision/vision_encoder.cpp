// The DeepSeek-ViT forward, the aligner and the image span assembly.
#include "engine/vision/vision_encoder.h"

#include <cmath>
#include <cstring>
#include <string>

#include "engine/util/error.h"
#include "engine/util/numeric.h"

namespace flashdesk {
namespace {

const VisionConfig& vision_config_of(const Checkpoint& ckpt) {
  if (!ckpt.config().vision)
    throw InvalidRequest(ckpt.dir().string() +
                         ": the model has no vision tower (no vision_config)");
  return *ckpt.config().vision;
}

// A BF16 [dim] checkpoint vector as host floats.
std::vector<float> host_vector(const Checkpoint& ckpt, const std::string& name) {
  const TensorView v = ckpt.tensor(name);
  FD_CHECK(v.dtype == DType::BF16, name + ": expected BF16");
  std::vector<float> out(static_cast<size_t>(v.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t h = 0;
    std::memcpy(&h, v.data + 2 * i, 2);  // the data is only byte-aligned
    out[i] = bf16_to_f32(h);
  }
  return out;
}

}  // namespace

void vit_rope_tables(int64_t head_dim, double theta, int64_t n_h, int64_t n_w,
                     std::vector<float>& cos, std::vector<float>& sin) {
  const int64_t axis = head_dim / 2, half = axis / 2;  // phases per patch; per spatial axis
  std::vector<float> inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)  // FP32 as the trainer: 1 / theta^(2i / axis)
    inv[static_cast<size_t>(i)] =
        1.0f /
        std::pow(static_cast<float>(theta), static_cast<float>(2 * i) / static_cast<float>(axis));
  cos.assign(static_cast<size_t>(n_h * n_w * axis), 0.0f);
  sin.assign(cos.size(), 0.0f);
  for (int64_t r = 0; r < n_h; ++r)
    for (int64_t c = 0; c < n_w; ++c)
      for (int64_t i = 0; i < axis; ++i) {
        const float pos = static_cast<float>(i < half ? r : c);
        const float phase = pos * inv[static_cast<size_t>(i % half)];
        const size_t at = static_cast<size_t>((r * n_w + c) * axis + i);
        cos[at] = std::cos(phase);
        sin[at] = std::sin(phase);
      }
}

VisionEncoder::VisionEncoder(const Checkpoint& ckpt, Backend& backend)
    : be_(backend), ops_(make_vision_ops(backend)), vc_(vision_config_of(ckpt)) {
  dim_ = ckpt.config().text.hidden_size;
  auto lin = [&](const std::string& name) { return be_.upload_linear(ckpt.tensor(name), nullptr); };
  auto vec = [&](const std::string& name) { return be_.upload_f32(ckpt.tensor(name)); };
  w_.patch_embed = lin("vision.patch_embed.proj.weight");
  w_.patch_bias = vec("vision.patch_embed.proj.bias");
  for (int64_t b = 0; b < vc_.num_hidden_layers; ++b) {
    const std::string p = "vision.blocks." + std::to_string(b) + ".";
    w_.blocks.push_back(VitBlockWeights{vec(p + "norm1.weight"), vec(p + "norm2.weight"),
                                        lin(p + "attn.wqkv.weight"), vec(p + "attn.wqkv.bias"),
                                        lin(p + "attn.wo.weight"), vec(p + "attn.wo.bias"),
                                        lin(p + "mlp.w1.weight"), lin(p + "mlp.w2.weight")});
  }
  w_.norm = vec("vision.norm.weight");
  w_.aligner_w1 = lin("aligner.w1.weight");
  w_.aligner_b1 = vec("aligner.w1.bias");
  w_.aligner_w2 = lin("aligner.w2.weight");
  w_.aligner_b2 = vec("aligner.w2.bias");
  std::vector<float> delim;
  for (const char* name : {"image_start", "image_newline", "image_end"}) {
    const std::vector<float> v = host_vector(ckpt, name);
    delim.insert(delim.end(), v.begin(), v.end());
  }
  w_.delimiters = be_.alloc(DType::F32, Shape{3, dim_});
  be_.write(w_.delimiters, delim.data(), delim.size() * sizeof(float));
}

VisionEncoder::~VisionEncoder() = default;

// bf16(x . W^T (+ bias)), the sum and the bias in FP32.
Tensor VisionEncoder::linear(const Tensor& x, const LinearWeight& w, const Tensor* bias) {
  Tensor y = be_.alloc(DType::F32, Shape{x.rows(), w.out});
  if (!bias) {
    be_.linear(x, w, kBf16Linear, y);
    return y;
  }
  be_.linear(x, w, kF32Linear, y);
  ops_->add_bias_bf16(y, *bias);
  return y;
}

void VisionEncoder::block(Tensor& x, const VitBlockWeights& b, const PreprocessedImage& image) {
  const int64_t P = x.rows(), d = vc_.hidden_size, H = vc_.num_attention_heads;
  const float eps = static_cast<float>(vc_.norm_eps);
  Tensor h = be_.alloc(DType::F32, Shape{P, d});
  be_.rms_norm(x, &b.norm1, eps, h);
  const Tensor qkv = linear(h, b.wqkv, &b.wqkv_bias);
  if (rope_h_ != image.vit_h || rope_w_ != image.vit_w) {
    vit_rope_tables(d / H, vc_.rope_theta, image.vit_h, image.vit_w, cos_, sin_);
    rope_h_ = image.vit_h;
    rope_w_ = image.vit_w;
  }
  Tensor o = be_.alloc(DType::F32, Shape{P, d});
  const float scale = 1.0f / std::sqrt(static_cast<float>(d / H));
  ops_->vit_attention(qkv, H, cos_, sin_, scale, o);
  ops_->add_bf16(x, linear(o, b.wo, &b.wo_bias));
  be_.rms_norm(x, &b.norm2, eps, h);
  const Tensor gu = linear(h, b.w1, nullptr);
  Tensor a = be_.alloc(DType::F32, Shape{P, vc_.intermediate_size});
  ops_->swiglu_bf16(gu, a);
  ops_->add_bf16(x, linear(a, b.w2, nullptr));
}

Tensor VisionEncoder::features(const PreprocessedImage& image) {
  const int64_t P = image.vit_h * image.vit_w, per_patch = 3 * vc_.patch_size * vc_.patch_size;
  FD_CHECK(P > 0 && static_cast<int64_t>(image.patches.size()) == P * per_patch,
           "VisionEncoder: patches do not match the " + std::to_string(image.vit_h) + "x" +
               std::to_string(image.vit_w) + " grid");
  Tensor patches = be_.alloc(DType::F32, Shape{P, per_patch});
  be_.write(patches, image.patches.data(), image.patches.size() * sizeof(float));
  Tensor x = linear(patches, w_.patch_embed, &w_.patch_bias);
  for (const VitBlockWeights& b : w_.blocks) block(x, b, image);
  Tensor out = be_.alloc(DType::F32, Shape{P, vc_.hidden_size});
  be_.rms_norm(x, &w_.norm, static_cast<float>(vc_.norm_eps), out);
  return out;
}

Tensor VisionEncoder::align(const Tensor& feats, const PreprocessedImage& image) {
  const int64_t r = vc_.downsample_ratio;
  const int64_t cells = static_cast<int64_t>(image.grid.rows) * image.grid.cols;
  Tensor cell_in = be_.alloc(DType::F32, Shape{cells, vc_.hidden_size * r * r});
  ops_->pixel_unshuffle(feats, image.vit_h, image.vit_w, r, cell_in);
  Tensor h = linear(cell_in, w_.aligner_w1, &w_.aligner_b1);
  ops_->gelu_bf16(h);
  return linear(h, w_.aligner_w2, &w_.aligner_b2);
}

Tensor VisionEncoder::span_rows(const Tensor& aligned, const ImageGrid& grid) {
  const int64_t rows = grid.rows, cols = grid.cols;
  check_shape(aligned, Shape{rows * cols, dim_}, "aligned image rows");
  Tensor span = be_.alloc(DType::F32, Shape{static_cast<int64_t>(grid.token_count()), dim_});
  std::vector<int64_t> cell_src, cell_dst, delim_src, delim_dst;
  delim_src.push_back(0);  // IMAGE_START
  delim_dst.push_back(0);
  for (int64_t y = 0; y < rows; ++y) {
    for (int64_t x = 0; x < cols; ++x) {
      cell_src.push_back(y * cols + x);
      cell_dst.push_back(1 + y * (cols + 1) + x);
    }
    delim_src.push_back(1);  // IMAGE_NEW_LINE ends every row
    delim_dst.push_back(1 + y * (cols + 1) + cols);
  }
  delim_src.push_back(2);  // IMAGE_END
  delim_dst.push_back(span.rows() - 1);
  be_.scatter_rows(aligned, cell_src, span, cell_dst);
  be_.scatter_rows(w_.delimiters, delim_src, span, delim_dst);
  return span;
}

Tensor VisionEncoder::encode(const PreprocessedImage& image) {
  return span_rows(align(features(image), image), image.grid);
}

}  // namespace flashdesk
