// Rows through the block version of torch's selection (torch_select_rows.h).
#include "engine/ops/cuda/cuda_backend.h"
#include "engine/ops/cuda/device_context.h"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/cuda/torch_select_block.cuh"
#include "engine/ops/cuda/torch_select_rows.h"

namespace flashdesk {
namespace cuda {
namespace {

constexpr int kRowThreads = 256;

__global__ void __launch_bounds__(kRowThreads)
    torch_select_rows_kernel(torch_select::Scored* pairs, int32_t* lists, int64_t n, int64_t k,
                             SelectForm form) {
  FD_GRID_PROLOGUE();
  __shared__ int warp_totals[kRowThreads / 32];
  const int64_t row = blockIdx.x;
  const BlockSelectRoom room{lists + row * 2 * n, lists + row * 2 * n + n, heap_room(),
                             kHeapRoomPairs};
  block_torch_select(pairs + row * n, n, k, room, warp_totals, form);
}

}  // namespace
}  // namespace cuda

void torch_select_rows(CudaBackend& be, Tensor& pairs, int64_t n, int64_t k) {
  const int64_t rows = pairs.rows();
  FD_CHECK(pairs.dtype() == DType::U8 &&
               pairs.shape().row_numel() == n * static_cast<int64_t>(sizeof(torch_select::Scored)),
           "torch_select_rows: pairs must be U8 [rows, n * 8]");
  FD_CHECK(k >= 0 && k <= n, "torch_select_rows: k outside [0, n]");
  if (rows == 0 || n == 0) return;
  cuda::DeviceContext& ctx = be.context();
  cuda::DeviceGuard g(ctx.device());
  Tensor lists = ctx.scratch(DType::I32, Shape{rows, 2 * n});
  FD_LAUNCH(cuda::torch_select_rows_kernel, dim3(static_cast<unsigned>(rows)),
            dim3(cuda::kRowThreads), 0, ctx.stream(), cuda::ptr<torch_select::Scored>(pairs),
            cuda::ptr<int32_t>(lists), n, k,
            cuda::select_form(be.select_runs(), be.heap_steps(), be.select_warp_tail(),
                              be.select_stop_masks()));
}

}  // namespace flashdesk
