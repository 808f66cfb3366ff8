// The V4.1 image preprocessing (docs/model-spec.md §8): the processed size (minimum pixels, round
// up to the patch, the image-token budget with the aspect ratio kept), the letterbox to that size
// (PIL's ImageOps.pad: bicubic resize, centred on grey 127), normalisation to [-1, 1] and the
// 14x14 patches in row-major order, each channel-major.
//
// Goals: bit-exact with the reference processor for the geometry and the resize (PIL's
// fixed-point bicubic), so the patches match what the model was trained on; sizes follow
// tools/demo/vision_layout.py, the trainer's statement of the same rules. Non-goals: the
// max_wh_ratio crop (null in V4.1), tiling into several crops.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/checkpoint/config.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/vision/image_decode.h"

namespace flashdesk {

struct PixelSize {
  int64_t height = 0;
  int64_t width = 0;
  bool operator==(const PixelSize&) const = default;
};

// The size an image of `in` pixels is letterboxed to.
PixelSize processed_size(PixelSize in, const VisionConfig& vc);
// The LLM token grid of an image at its processed size: ceil((side / patch) / downsample).
ImageGrid llm_grid(PixelSize processed, const VisionConfig& vc);

// PIL Image.resize(size, BICUBIC) of an RGB image: separable, horizontal pass first, 22-bit
// fixed-point coefficients, clipped to 8 bits after each pass.
RgbImage resize_bicubic(const RgbImage& in, int64_t width, int64_t height);
// PIL ImageOps.pad(image, (width, height), BICUBIC, color): the largest aspect-kept resize that
// fits, centred (offset rounded half to even) on `grey`.
RgbImage letterbox(const RgbImage& in, int64_t width, int64_t height, uint8_t grey = 127);

struct PreprocessedImage {
  int64_t vit_h = 0, vit_w = 0;  // patch grid
  ImageGrid grid;                // LLM token grid (aligner cells)
  // [vit_h * vit_w, 3 * patch * patch]: bf16((x / 255 - 0.5) / 0.5), patch (py, px) row-major,
  // each patch ordered c * patch^2 + y * patch + x.
  std::vector<float> patches;
};

// letterbox(image, processed_size) then normalised patches.
PreprocessedImage preprocess_image(const RgbImage& image, const VisionConfig& vc);

}  // namespace flashdesk
