// torch.topk's CPU selection over rows of scores on the device, one thread block per row
// (torch_select_block.cuh): what the indexer runs when its k-th best score ties, callable on its
// own so tests can hold the block version to the step-by-step host one on any row, adversarial
// ones included.
#pragma once

#include <cstdint>

#include "engine/ops/tensor.h"

namespace flashdesk {
class CudaBackend;

// pairs: a device U8 tensor [rows, n * 8] of torch_select::Scored (value, index) pairs. Each row
// is permuted so that its first k pairs are those torch_select::select(row, n, k, false) puts
// there (in the heap-select case, 64 k <= n, without the final heap sort of the first k).
void torch_select_rows(CudaBackend& be, Tensor& pairs, int64_t n, int64_t k);

}  // namespace flashdesk
