// CudaBackend::draw_linear: a synthetic checkpoint's linear drawn on the GPU (random_draw.h), the
// units the kernel cannot vouch for generated on the host and copied over.
#include <algorithm>
#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

#include "engine/ops/cuda/cuda_backend.h"
#include "engine/ops/cuda/cuda_handles.h"
#include "engine/ops/cuda/device_context.h"
#include "engine/ops/cuda/step_ops.h"
#include "engine/ops/drawn_linear.h"
#include "engine/util/error.h"

namespace flashdesk {

LinearWeight CudaBackend::draw_linear(const RandomWeightRecipe& recipe, int64_t first_row,
                                      int64_t rows) {
  using Format = RandomTensorPlan::Format;
  if (!draw_weights_ || recipe.format == Format::Fp8Rows) return {};
  const DrawnLinearLayout layout = drawn_linear_layout(recipe, first_row, rows);
  cuda::DeviceGuard g(ctx_->device());
  const size_t data_bytes = static_cast<size_t>(layout.data.numel()) * dtype_size(layout.dtype);
  Tensor data(ctx_->weights().allocate(data_bytes), 0, layout.dtype, layout.data), scale;
  if (layout.scaled)
    scale = Tensor(ctx_->weights().allocate(static_cast<size_t>(layout.scale.numel())), 0,
                   DType::F8_E8M0, layout.scale);

  cuda::RandomDraw d = draw_of(recipe);
  d.first_row = first_row;
  d.rows = rows;
  const int64_t units = cuda::draw_units(d);
  const std::vector<uint8_t> flagged =
      draw_flagged(d, data.bytes(), layout.scaled ? scale.bytes() : nullptr);

  // Each flagged unit's rows and scale rows from the host's generator, over the drawn ones.
  const int64_t unit_rows = recipe.format == Format::Fp8Tiles ? 32 : 1;
  const size_t row_bytes = data_bytes / static_cast<size_t>(rows);
  const size_t scale_row_bytes = layout.scaled ? static_cast<size_t>(layout.scale[1]) : 0;
  // All of them on the host's threads at once, then copied with one wait: an FP8 tile group of
  // a wide linear is flagged often (163 K values), and a wait a unit made wq_b's draw slower than
  // the host's (cuda_draw_bench, twenty-sixth session).
  std::vector<int64_t> fix;
  for (int64_t u = 0; u < units; ++u)
    if (flagged[static_cast<size_t>(u)]) fix.push_back(u);
  if (fix.empty()) return drawn_linear(recipe, layout, std::move(data), std::move(scale));
  const size_t unit_bytes = row_bytes * static_cast<size_t>(unit_rows);
  std::vector<uint8_t> w(unit_bytes * fix.size()), s(scale_row_bytes * fix.size());
  const auto unit_range = [&](size_t i) {
    const int64_t r0 = fix[i] * unit_rows;
    return std::pair{r0, std::min(rows, r0 + unit_rows)};
  };
  {
    const size_t threads =
        std::min<size_t>(fix.size(), std::max(1u, std::thread::hardware_concurrency()));
    std::vector<std::jthread> pool;
    for (size_t t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        for (size_t i = t; i < fix.size(); i += threads) {
          const auto [r0, r1] = unit_range(i);
          recipe.host_rows(first_row + r0, first_row + r1, w.data() + i * unit_bytes,
                           s.data() + i * scale_row_bytes);
        }
      });
  }
  for (size_t i = 0; i < fix.size(); ++i) {
    const auto [r0, r1] = unit_range(i);
    cuda::copy_async(data.bytes() + static_cast<size_t>(r0) * row_bytes, w.data() + i * unit_bytes,
                     row_bytes * static_cast<size_t>(r1 - r0), cudaMemcpyHostToDevice,
                     ctx_->stream());
    if (layout.scaled)  // FP4 rows: a scale row a row; FP8 tiles: a scale row a 32-row group
      cuda::copy_async(scale.bytes() + static_cast<size_t>(fix[i]) * scale_row_bytes,
                       s.data() + i * scale_row_bytes, scale_row_bytes, cudaMemcpyHostToDevice,
                       ctx_->stream());
  }
  synchronize();  // the host buffers go when this returns
  draw_stats_.host_units += fix.size();
  return drawn_linear(recipe, layout, std::move(data), std::move(scale));
}

bool CudaBackend::draw_into_host(const RandomWeightRecipe& recipe, uint8_t* weight,
                                 uint8_t* scale) {
  if (!draw_weights_ || recipe.format != RandomTensorPlan::Format::Fp8Rows) return false;
  const std::string name(recipe.weight);
  FD_CHECK(recipe.dtype == DType::F8_E4M3 && recipe.cols % 32 == 0,
           name + ": an Engram table is FP8 rows of whole 32-value blocks");
  const int64_t rows = recipe.rows, cols = recipe.cols, blocks = cols / 32;
  const int64_t chunk = std::min(rows, draw_table_chunk_rows_ > 0
                                           ? draw_table_chunk_rows_
                                           : std::max<int64_t>(1, kDrawTableChunkBytes / cols));
  cuda::DeviceGuard g(ctx_->device());
  Tensor codes = ctx_->scratch(DType::F8_E4M3, Shape{chunk, cols});
  Tensor scales = ctx_->scratch(DType::F8_E8M0, Shape{chunk, blocks});
  cuda::RandomDraw d = draw_of(recipe);
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    d.first_row = r0;
    d.rows = std::min(chunk, rows - r0);
    const std::vector<uint8_t> flagged = draw_flagged(d, codes.bytes(), scales.bytes());
    uint8_t* host_codes = weight + r0 * cols;
    uint8_t* host_scales = scale + r0 * blocks;
    cuda::copy_async(host_codes, codes.bytes(), static_cast<size_t>(d.rows * cols),
                     cudaMemcpyDeviceToHost, ctx_->stream());
    cuda::copy_async(host_scales, scales.bytes(), static_cast<size_t>(d.rows * blocks),
                     cudaMemcpyDeviceToHost, ctx_->stream());
    synchronize();
    for (int64_t u = 0; u < d.rows; ++u)
      if (flagged[static_cast<size_t>(u)]) {
        recipe.host_rows(r0 + u, r0 + u + 1, host_codes + u * cols, host_scales + u * blocks);
        ++draw_stats_.host_units;
      }
  }
  return true;
}

cuda::RandomDraw CudaBackend::draw_of(const RandomWeightRecipe& recipe) const {
  cuda::RandomDraw d;
  d.format = recipe.format;
  d.rows = recipe.rows;
  d.cols = recipe.cols;
  d.stream = recipe.stream;
  d.std = recipe.std;
  d.mean = recipe.mean;
  d.margin_log2 = draw_margin_log2_;
  return d;
}

std::vector<uint8_t> CudaBackend::draw_flagged(const cuda::RandomDraw& d, uint8_t* weight,
                                               uint8_t* scale) {
  const int64_t units = cuda::draw_units(d);
  Tensor flags = ctx_->scratch(DType::U8, Shape{units});
  cuda::draw_random_weight(*ctx_, d, weight, scale, flags.bytes());
  std::vector<uint8_t> flagged(static_cast<size_t>(units));
  read(flags, flagged.data(), flagged.size());  // waits for the kernel
  ++draw_stats_.draws;
  draw_stats_.units += static_cast<uint64_t>(units);
  return flagged;
}

}  // namespace flashdesk
