// The selection torch.topk(largest=True) makes on the CPU, reproduced exactly: which indices of a
// score row it returns when scores tie. The official V4.1 code picks the indexer's top-k, the
// candidate blocks and the routed experts with it, and bf16 index scores tie often, so an engine
// that breaks ties another way attends to other entries (docs/numerics.md "Top-k").
//
// torch's CPU kernel (ATen native/cpu/TopKImpl.h) fills (value, index) pairs in index order, then
// runs std::partial_sort over them when 64 k <= n, else std::nth_element at k - 1 (and, with
// sorted=True, std::sort of the first k - 1), comparing values only (NaN first). The same
// libstdc++ algorithms on the same input give the same result; tests/engine/torch_topk_test.cpp
// checks it against indices torch 2.11 returned (tests/data/torch_topk_ties.json).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace flashdesk {

// The k indices torch.topk(values, k, largest=True, sorted=sorted) returns, in its order.
std::vector<int32_t> torch_topk(std::span<const float> values, int64_t k, bool sorted);

}  // namespace flashdesk
