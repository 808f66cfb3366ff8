// The selection torch.topk(largest=True) makes on the CPU, reproduced exactly: which indices of a
// score row it returns when scores tie. The official V4.1 code picks the indexer's top-k, the
// candidate blocks and the routed experts with it, and bf16 index scores tie often, so an engine
// that breaks ties another way attends to other entries (docs/numerics.md "Top-k").
//
// torch's CPU kernel (ATen native/cpu/TopKImpl.h) fills (value, index) pairs in index order, then
// runs std::partial_sort over them when 64 k <= n, else std::nth_element at k - 1 (and, with
// sorted=True, std::sort of the first k - 1), comparing values only (NaN first). Those steps are
// in engine/util/torch_select.h (host and CUDA device code); tests/engine/torch_topk_test.cpp
// checks them against indices torch 2.11 returned (tests/data/torch_topk_ties.json) and against
// libstdc++'s algorithms.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace flashdesk {

// The k indices torch.topk(values, k, largest=True, sorted=sorted) returns, in its order.
std::vector<int32_t> torch_topk(std::span<const float> values, int64_t k, bool sorted);

// The FP32 sum of a short row as torch's CPU `sum(dim=-1)` adds it (the official MoE gate
// normalises the routing weights by it). Measured with torch 2.11 on 20,000 rows each
// (tools/torch_numerics_probe.py): 6 values as ((((w0 + w4) + w5) + w1) + w2) + w3 (a 4-lane
// accumulator with the tail in lane 0), 2 and 8 values in index order; other lengths are added
// in index order, unmeasured.
float torch_row_sum(std::span<const float> row);

}  // namespace flashdesk
