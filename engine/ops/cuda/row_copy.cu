// Row copies at uploaded row numbers (row_copy.h).
#include "engine/ops/cuda/row_copy.h"

#include <vector>

#include "engine/ops/cuda/device_context.h"
#include "engine/ops/cuda/kernel_util.cuh"

namespace flashdesk::cuda {
namespace {

constexpr int kThreads = 256;

// Block (x, r) copies row pair r in units of `Unit` (16 bytes where every address allows, else
// single bytes); rows[r] is the source row, rows[n + r] the destination row.
template <class Unit>
__global__ void __launch_bounds__(kThreads)
    copy_rows_kernel(const uint8_t* src, uint8_t* dst, const int64_t* rows, int64_t n,
                     int64_t units) {
  FD_GRID_PROLOGUE();
  const int64_t r = blockIdx.y;
  const Unit* from = reinterpret_cast<const Unit*>(src) + rows[r] * units;
  Unit* to = reinterpret_cast<Unit*>(dst) + rows[n + r] * units;
  for (int64_t u = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; u < units;
       u += static_cast<int64_t>(gridDim.x) * kThreads)
    to[u] = from[u];
}

}  // namespace

void copy_rows_listed(DeviceContext& ctx, const Tensor& src, std::span<const int64_t> src_rows,
                      Tensor& dst, std::span<const int64_t> dst_rows, size_t row_bytes) {
  const int64_t n = static_cast<int64_t>(src_rows.size());
  if (n == 0 || row_bytes == 0) return;
  std::vector<int64_t> rows(src_rows.begin(), src_rows.end());
  rows.insert(rows.end(), dst_rows.begin(), dst_rows.end());
  Tensor listed = ctx.upload_span(std::span<const int64_t>(rows), DType::I64);
  const uint8_t* from = src.bytes();
  uint8_t* to = dst.bytes();
  const bool wide = row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(from) % 16 == 0 &&
                    reinterpret_cast<uintptr_t>(to) % 16 == 0;
  const int64_t units = static_cast<int64_t>(wide ? row_bytes / 16 : row_bytes);
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(blocks_for(units, kThreads), 64)),
                  static_cast<unsigned>(n));
  if (wide)
    FD_LAUNCH(copy_rows_kernel<uint4>, grid, dim3(kThreads), 0, ctx.stream(), from, to,
              ptr<const int64_t>(listed), n, units);
  else
    FD_LAUNCH(copy_rows_kernel<uint8_t>, grid, dim3(kThreads), 0, ctx.stream(), from, to,
              ptr<const int64_t>(listed), n, units);
}

}  // namespace flashdesk::cuda
