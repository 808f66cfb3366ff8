// Cache rows on the CUDA backend: FP8 / FP4 quantisation into the byte layouts of kv_format.h
// (codes bit-identical to the CPU reference: same scales, same round-to-nearest-even), their
// dequantisation, and the ratio-m compressor pooling with its pending tokens.
#include <algorithm>
#include <span>
#include <vector>

#include "engine/ops/cuda/cuda_backend.h"
#include "engine/ops/cuda/device_context.h"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/cuda/row_copy.h"
#include "engine/ops/cuda/row_norm.cuh"

namespace flashdesk {
namespace cuda {

// One cache row's scale block b (kv_block(f) values of x): codes and scale written into `row`.
__device__ inline void quantize_kv_block(KvFormat f, const float* xb, int64_t block,
                                         int64_t code_bytes, int64_t b, uint8_t* row) {
  float amax = 0.0f;
  for (int64_t j = 0; j < block; ++j) amax = fmaxf(amax, fabsf(xb[j]));
  if (f == KvFormat::Fp8Window) {
    const uint8_t code = fp8_scale_code(amax);
    const float s = e8m0_to_f32(code);
    for (int64_t j = 0; j < block; ++j) row[b * block + j] = fp8_code(xb[j], s);
    row[code_bytes + b] = code;
    return;
  }
  const uint8_t code =
      f == KvFormat::Fp4Entry ? fp4_e4m3_scale_code(amax) : fp4_e8m0_scale_code(amax);
  const float s = f == KvFormat::Fp4Entry ? e4m3_to_f32(code) : e8m0_to_f32(code);
  uint8_t* packed = row + b * block / 2;
  for (int64_t j = 0; j < block; j += 2)
    packed[j / 2] = static_cast<uint8_t>(fp4_code(xb[j], s) | (fp4_code(xb[j + 1], s) << 4));
  row[code_bytes + b] = code;
}

// Element c of a cache row, dequantised.
__device__ inline float dequantize_kv_value(KvFormat f, const uint8_t* row, int64_t dim,
                                            int64_t c) {
  const int64_t block = kv_block(f), code_bytes = kv_code_bytes(f, dim);
  const uint8_t scale = row[code_bytes + c / block];
  if (f == KvFormat::Fp8Window) return e4m3_to_f32(row[c]) * e8m0_to_f32(scale);
  const uint8_t byte = row[c / 2];
  const float v = e2m1_to_f32((c & 1) ? (byte >> 4) : (byte & 0xF));
  return v * (f == KvFormat::Fp4Entry ? e4m3_to_f32(scale) : e8m0_to_f32(scale));
}

namespace {

// Value c of a cache row of `dim` values (its thread's v; lanes past the row's end pass in =
// false and 0): the `block` lanes of a scale block (16 or 32, which divides 32 and the row) find
// its amax by shuffles and write a code each (FP4: the even lane writes the pair). Every lane of
// the warp calls it.
__device__ inline void quantize_row_value(KvFormat f, float v, int64_t c, bool in, int64_t dim,
                                          uint8_t* row) {
  const int block = static_cast<int>(kv_block(f));
  float amax = fabsf(v);
  for (int o = block / 2; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(kFullMask, amax, o));
  const int64_t scale_at = kv_code_bytes(f, dim) + c / block;
  if (f == KvFormat::Fp8Window) {
    const uint8_t code = fp8_scale_code(amax);
    if (in) row[c] = fp8_code(v, e8m0_to_f32(code));
    if (in && c % block == 0) row[scale_at] = code;
    return;
  }
  const uint8_t code =
      f == KvFormat::Fp4Entry ? fp4_e4m3_scale_code(amax) : fp4_e8m0_scale_code(amax);
  const float s = f == KvFormat::Fp4Entry ? e4m3_to_f32(code) : e8m0_to_f32(code);
  const uint32_t q = fp4_code(v, s), odd = __shfl_down_sync(kFullMask, q, 1);
  if (in && c % 2 == 0) row[c / 2] = static_cast<uint8_t>(q | (odd << 4));
  if (in && c % block == 0) row[scale_at] = code;
}

// One thread per value (quantize_row_value; a thread per block looping over its 32 values was a
// decode step's 7 µs for one row).
// dst: row 0's address, or with first_row set, the table's (row *first_row first: a value in
// device memory inside a step graph, so that the same parameters write another row each step).
__global__ void quantize_rows_kernel(KvFormat f, const float* x, int64_t n, int64_t dim,
                                     uint8_t* dst, int64_t row_bytes, const int64_t* first_row) {
  FD_GRID_PROLOGUE();
  if (first_row) dst += *first_row * row_bytes;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool in = i < n * dim;  // every lane stays for the shuffles
  const int64_t r = in ? i / dim : 0, c = in ? i % dim : 0;
  quantize_row_value(f, in ? x[i] : 0.0f, c, in, dim, dst + r * row_bytes);
}

// rope_quantize_rows at decode sizes: a block a row (x [n, dim], one head), the norm as
// rms_norm's decode kernel with the same threads (row_norm.cuh), the rotation of the last
// 2 * pairs values as rope_kernel's, the codes as quantize_rows_kernel's: the three kernels'
// bits in one launch (a decode layer's key/value row and compressed entries ran them as a chain
// of three small kernels, each waiting for the one before). The row goes through shared memory
// (dim floats, dynamic) and back into x.
__global__ void rope_quantize_rows_kernel(KvFormat f, float* x, int64_t dim, const float* norm,
                                          float eps, const int64_t* positions,
                                          const float* inv_freq, int64_t pairs, uint8_t* dst,
                                          int64_t row_bytes, const int64_t* first_row) {
  FD_GRID_PROLOGUE();
  __shared__ float scratch[32];
  FD_DYNAMIC_SMEM(float, vals);
  if (first_row) dst += *first_row * row_bytes;
  float* row = x + static_cast<int64_t>(blockIdx.x) * dim;
  if (norm) {
    rms_norm_held_row(row, norm, eps, dim, scratch, vals);
  } else {
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) vals[j] = row[j];
  }
  __syncthreads();
  const int64_t pos = positions[blockIdx.x];
  for (int64_t p = threadIdx.x; p < pairs; p += blockDim.x) {
    float c, s;
    rope_angle(pos, inv_freq[p], 1.0f, &c, &s);
    float* v = vals + (dim - 2 * pairs) + 2 * p;
    float pair[2] = {v[0], v[1]};
    rope_rotate(pair, c, s);
    v[0] = pair[0];
    v[1] = pair[1];
  }
  __syncthreads();
  uint8_t* out = dst + static_cast<int64_t>(blockIdx.x) * row_bytes;
  for (int64_t base = 0; base < dim; base += blockDim.x) {  // uniform: every lane shuffles
    const int64_t c = base + threadIdx.x;
    const bool in = c < dim;
    const float v = in ? vals[c] : 0.0f;
    if (in) row[c] = v;
    quantize_row_value(f, v, c, in, dim, out);
  }
}

__global__ void dequantize_rows_kernel(KvFormat f, const uint8_t* src, int64_t row_bytes, int64_t n,
                                       int64_t dim, float* out) {
  FD_GRID_PROLOGUE();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * dim) return;
  out[i] = dequantize_kv_value(f, src + (i / dim) * row_bytes, dim, i % dim);
}

// out [groups, d]: per group and channel, softmax of the m scores, weighted sum of the m kv rows
// (token t of the virtual sequence [pending | new]), bf16.
__global__ void compressor_pool_kernel(const float* kv, const float* score, const float* pkv,
                                       const float* psc, int64_t n_pending, int64_t ratio,
                                       int64_t groups, int64_t d, float* out) {
  FD_GRID_PROLOGUE();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= groups * d) return;
  const int64_t g = i / d, c = i % d;
  auto kv_at = [&](int64_t t) {
    return t < n_pending ? pkv[t * d + c] : kv[(t - n_pending) * d + c];
  };
  auto sc_at = [&](int64_t t) {
    return t < n_pending ? psc[t * d + c] : score[(t - n_pending) * d + c];
  };
  float mx = -INFINITY;
  for (int64_t t = 0; t < ratio; ++t) mx = fmaxf(mx, sc_at(g * ratio + t));
  float sum = 0.0f;
  for (int64_t t = 0; t < ratio; ++t) sum += expf(sc_at(g * ratio + t) - mx);
  float acc = 0.0f;
  for (int64_t t = 0; t < ratio; ++t) {
    const float p = expf(sc_at(g * ratio + t) - mx);
    acc = __fadd_rn(acc, __fmul_rn(kv_at(g * ratio + t), p / sum));
  }
  out[i] = round_bf16(acc);
}

void check_rows(KvFormat f, int64_t dim, const Tensor& rows, int64_t first, int64_t n,
                const char* what) {
  FD_CHECK(dim % kv_block(f) == 0, std::string(what) + ": dim not a multiple of the block");
  check_dtype(rows, DType::U8, what);
  FD_CHECK(
      rows.shape().rank() == 2 && rows.dim(1) == kv_row_bytes(f, dim),
      std::string(what) + ": cache rows " + rows.shape().str() + " for dim " + std::to_string(dim));
  FD_CHECK(first >= 0 && first + n <= rows.dim(0), std::string(what) + ": rows out of range");
}

// Where a kernel writes a table's rows from first_row: outside a step graph, that row's address;
// inside one, the table's, with first_row a value in device memory (`at`, held until the launch
// is issued) so that the same parameters write another row each replay.
struct RowsFrom {
  uint8_t* rows;
  const int64_t* first_row;
  Tensor at;
};
RowsFrom rows_from(DeviceContext& ctx, Tensor& table, int64_t first_row) {
  if (!ctx.in_step()) return {ptr<uint8_t>(table) + first_row * table.dim(1), nullptr, Tensor()};
  Tensor at = ctx.upload_span(std::span<const int64_t>(&first_row, 1), DType::I64);
  return {ptr<uint8_t>(table), ptr<const int64_t>(at), at};
}

}  // namespace
}  // namespace cuda

using cuda::blocks_for;
using cuda::ptr;

void CudaBackend::quantize_rows(KvFormat format, const Tensor& x, Tensor& dst, int64_t first_row) {
  const int64_t n = x.rows(), dim = x.shape().row_numel();
  cuda::check_rows(format, dim, dst, first_row, n, "quantize_rows");
  const int64_t rb = dst.dim(1), work = n * dim;
  FD_CHECK(32 % kv_block(format) == 0, "quantize_rows: a scale block must divide a warp");
  if (work == 0) return;
  cuda::DeviceGuard g(ctx_->device());
  const cuda::RowsFrom to = cuda::rows_from(*ctx_, dst, first_row);
  FD_LAUNCH(cuda::quantize_rows_kernel, dim3(blocks_for(work, 256)), dim3(256), 0, ctx_->stream(),
            format, ptr<const float>(x), n, dim, to.rows, rb, to.first_row);
}

void CudaBackend::rope_quantize_rows(Tensor& x, const Tensor* norm, float eps,
                                     std::span<const int64_t> positions,
                                     std::span<const float> inv_freq, KvFormat format, Tensor& dst,
                                     int64_t first_row) {
  const int64_t n = x.rows(), dim = x.shape().row_numel();
  const int64_t pairs = static_cast<int64_t>(inv_freq.size()),
                threads = cuda::decode_norm_threads(dim);
  // One launch where its norm is rms_norm's decode kernel (fewer rows than multiprocessors, the
  // row held by its threads) and the row is whole warps of whole scale blocks; else the three.
  const bool one_kernel = fuse_ && fuse_cache_rows_ && n > 0 && n < ctx_->multiprocessors() &&
                          dim <= cuda::kNormHeld * threads && dim % 32 == 0 &&
                          32 % kv_block(format) == 0 && 2 * pairs <= dim &&
                          static_cast<int64_t>(positions.size()) == n;
  if (!one_kernel)
    return Backend::rope_quantize_rows(x, norm, eps, positions, inv_freq, format, dst, first_row);
  check_dtype(x, DType::F32, "rope_quantize_rows x");
  if (norm) check_shape(*norm, Shape{dim}, "rope_quantize_rows norm");
  cuda::check_rows(format, dim, dst, first_row, n, "rope_quantize_rows");
  const int64_t rb = dst.dim(1);
  cuda::DeviceGuard g(ctx_->device());
  Tensor pos = ctx_->upload_span(positions, DType::I64);
  Tensor freq = ctx_->upload_span(inv_freq, DType::F32);
  const cuda::RowsFrom to = cuda::rows_from(*ctx_, dst, first_row);
  // The row in shared memory: dim <= kNormHeld * threads floats, at most 32 KiB.
  FD_LAUNCH(cuda::rope_quantize_rows_kernel, dim3(static_cast<unsigned>(n)),
            dim3(static_cast<unsigned>(threads)), static_cast<size_t>(dim) * sizeof(float),
            ctx_->stream(), format, ptr<float>(x), dim, norm ? ptr<const float>(*norm) : nullptr,
            eps, ptr<const int64_t>(pos), ptr<const float>(freq), pairs, to.rows, rb, to.first_row);
}

void CudaBackend::dequantize_rows(KvFormat format, const Tensor& src, int64_t first_row,
                                  Tensor& out) {
  const int64_t n = out.rows(), dim = out.shape().row_numel();
  cuda::check_rows(format, dim, src, first_row, n, "dequantize_rows");
  const int64_t rb = src.dim(1);
  if (n * dim == 0) return;
  cuda::DeviceGuard g(ctx_->device());
  FD_LAUNCH(cuda::dequantize_rows_kernel, dim3(blocks_for(n * dim, 256)), dim3(256), 0,
            ctx_->stream(), format, ptr<const uint8_t>(src) + first_row * rb, rb, n, dim,
            ptr<float>(out));
}

void CudaBackend::compressor_pool(const Tensor& kv, const Tensor& score, int64_t ratio,
                                  Tensor& pending_kv, Tensor& pending_score, int64_t& n_pending,
                                  Tensor& out) {
  const int64_t n = kv.rows(), d = kv.shape().row_numel();
  check_shape(score, kv.shape(), "compressor score");
  check_shape(pending_kv, Shape{ratio, d}, "compressor pending kv");
  check_shape(pending_score, Shape{ratio, d}, "compressor pending score");
  FD_CHECK(n_pending >= 0 && n_pending < ratio, "compressor: bad pending count");
  const int64_t total = n_pending + n, groups = total / ratio;
  check_shape(out, Shape{groups, d}, "compressor out");
  cuda::DeviceGuard g(ctx_->device());
  if (groups * d > 0)
    FD_LAUNCH(cuda::compressor_pool_kernel, dim3(blocks_for(groups * d, 256)), dim3(256), 0,
              ctx_->stream(), ptr<const float>(kv), ptr<const float>(score),
              ptr<const float>(pending_kv), ptr<const float>(pending_score), n_pending, ratio,
              groups, d, ptr<float>(out));
  // The trailing incomplete group moves to the front of the pending rows. Rows that were pending
  // stay where they are (only when no group completed); new rows are copied after the pooling,
  // which the stream orders.
  const int64_t first = groups * ratio, left = total - first;
  const int64_t from_new = std::max(first, n_pending);
  const int64_t count = total - from_new;
  if (count > 0) {
    const size_t row = static_cast<size_t>(d) * sizeof(float);
    const int64_t dst_row = from_new - first, src_row = from_new - n_pending;
    // Inside a step graph the rows go to the device as values (row_copy.h): the pending row a
    // step writes moves on every step.
    if (ctx_->in_step()) {
      std::vector<int64_t> src_rows(static_cast<size_t>(count)), dst_rows(src_rows.size());
      for (int64_t i = 0; i < count; ++i) {
        src_rows[static_cast<size_t>(i)] = src_row + i;
        dst_rows[static_cast<size_t>(i)] = dst_row + i;
      }
      cuda::copy_rows_listed(*ctx_, kv, src_rows, pending_kv, dst_rows, row);
      cuda::copy_rows_listed(*ctx_, score, src_rows, pending_score, dst_rows, row);
    } else {
      cuda::copy_async(ptr<float>(pending_kv) + dst_row * d, ptr<const float>(kv) + src_row * d,
                       count * row, cudaMemcpyDeviceToDevice, ctx_->stream());
      cuda::copy_async(ptr<float>(pending_score) + dst_row * d,
                       ptr<const float>(score) + src_row * d, count * row, cudaMemcpyDeviceToDevice,
                       ctx_->stream());
    }
  }
  n_pending = left;
}

}  // namespace flashdesk
