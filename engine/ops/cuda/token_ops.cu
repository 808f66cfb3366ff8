// Tokens chosen on the CUDA backend (backend.h "tokens chosen on the backend"): embedding rows at
// ids that an earlier kernel wrote, the bias added and the argmax taken in one block per row, two
// row blocks joined by columns. With them a greedy DSpark draft chains its Markov rows on the
// device and reads its results back once (docs/dspark.md "On the GPU"); each is one small launch.
#include <cstdint>

#include "engine/ops/cuda/cuda_backend.h"
#include "engine/ops/cuda/device_context.h"
#include "engine/ops/cuda/kernel_util.cuh"

namespace flashdesk {
namespace cuda {
namespace {

constexpr int kArgmaxThreads = 1024;

// rows [n, d] = table[ids] (BF16 widened); an id outside the table gives a NaN row (the host
// cannot check ids it never sees).
__global__ void embed_rows_kernel(const uint16_t* table, int64_t vocab, const int32_t* ids,
                                  int64_t n, int64_t d, float* rows) {
  FD_GRID_PROLOGUE();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * d) return;
  const int64_t id = ids[i / d], j = i % d;
  rows[i] =
      id >= 0 && id < vocab ? bf16_bits_to_f32(table[id * d + j]) : __int_as_float(0x7FC00000);
}

// One block per row: x += bias (FP32), ids[row] = the first maximum of the sums. NaN sums take no
// part, and a NaN at index 0 is the answer: std::max_element's rule, which the reference follows.
__global__ void __launch_bounds__(kArgmaxThreads)
    add_argmax_kernel(float* x, const float* bias, int64_t V, int32_t* ids) {
  FD_GRID_PROLOGUE();
  __shared__ Best scratch[kArgmaxThreads / 32];
  float* row = x + blockIdx.x * V;
  const float* b = bias + blockIdx.x * V;
  Best mine{0.0f, -1};
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) {
    const float s = __fadd_rn(row[v], b[v]);
    row[v] = s;
    if (s == s) mine = better(mine, Best{s, static_cast<int32_t>(v)});
  }
  const Best top = block_best(mine, scratch);
  if (threadIdx.x != 0) return;
  const bool first_nan = row[0] != row[0];  // this thread wrote row[0]
  ids[blockIdx.x] = first_nan || top.i < 0 ? 0 : top.i;
}

// out [n, a + b] of 4-byte words = [left row | right row].
__global__ void concat_columns_kernel(const uint32_t* left, int64_t a, const uint32_t* right,
                                      int64_t b, int64_t n, uint32_t* out) {
  FD_GRID_PROLOGUE();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * (a + b)) return;
  const int64_t r = i / (a + b), c = i % (a + b);
  out[i] = c < a ? left[r * a + c] : right[r * b + (c - a)];
}

}  // namespace
}  // namespace cuda

using cuda::blocks_for;
using cuda::ptr;

void CudaBackend::embed_rows(const Tensor& table, const Tensor& ids, Tensor& rows) {
  check_embed_rows_args(table, ids, rows);
  const int64_t n = ids.dim(0), d = table.dim(1);
  if (n * d == 0) return;
  cuda::DeviceGuard g(ctx_->device());
  FD_LAUNCH(cuda::embed_rows_kernel, dim3(blocks_for(n * d, 256)), dim3(256), 0, ctx_->stream(),
            ptr<const uint16_t>(table), table.dim(0), ptr<const int32_t>(ids), n, d,
            ptr<float>(rows));
}

void CudaBackend::add_argmax(Tensor& x, const Tensor& bias, Tensor& ids) {
  check_add_argmax_args(x, bias, ids);
  const int64_t n = x.dim(0), V = x.dim(1);
  if (n == 0) return;
  cuda::DeviceGuard g(ctx_->device());
  FD_LAUNCH(cuda::add_argmax_kernel, dim3(static_cast<unsigned>(n)), dim3(cuda::kArgmaxThreads), 0,
            ctx_->stream(), ptr<float>(x), ptr<const float>(bias), V, ptr<int32_t>(ids));
}

void CudaBackend::concat_columns(const Tensor& left, const Tensor& right, Tensor& out) {
  check_concat_columns_args(left, right, out);
  const int64_t n = left.rows(), a = left.dim(1), b = right.dim(1);
  if (n * (a + b) == 0) return;
  cuda::DeviceGuard g(ctx_->device());
  FD_LAUNCH(cuda::concat_columns_kernel, dim3(blocks_for(n * (a + b), 256)), dim3(256), 0,
            ctx_->stream(), ptr<const uint32_t>(left), a, ptr<const uint32_t>(right), b, n,
            ptr<uint32_t>(out));
}

}  // namespace flashdesk
