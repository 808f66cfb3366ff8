// RoPE frequencies of a layer (docs/model-spec.md §3.1): base rope_theta without YaRN on
// window-only layers, compress_rope_theta with the YaRN ramp on compressed layers.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/checkpoint/config.h"

namespace flashdesk {

// inv_freq[i] for i < qk_rope_head_dim / 2, in FP32 as the reference computes them.
std::vector<float> rope_inv_freq(const TextConfig& text, int64_t compress_ratio);

}  // namespace flashdesk
