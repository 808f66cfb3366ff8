// Row copies whose row numbers live in device memory (uploaded), for the row copies inside a step
// graph (step_graph.h): a copy whose addresses come from the host (a window ring's slot) changes
// every step, which a recorded step cannot replay; a kernel reading uploaded row numbers keeps the
// same parameters, and its upload carries the new rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/ops/tensor.h"

namespace flashdesk::cuda {

class DeviceContext;

// dst row dst_rows[i] = src row src_rows[i], `row_bytes` each; one launch.
void copy_rows_listed(DeviceContext& ctx, const Tensor& src, std::span<const int64_t> src_rows,
                      Tensor& dst, std::span<const int64_t> dst_rows, size_t row_bytes);

}  // namespace flashdesk::cuda
