// Linear layers of the optimised CPU backend: the input prepared once (FP8 act_quant or a
// zero-padded copy), then the ISA's linear kernel over row (and token) parts on the pool.
#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/ops/cpu_opt/cpu_opt_backend.h"

namespace flashdesk {
namespace {

using cpu_opt::padded_cols;

void check_linear(const Tensor& x, const LinearWeight& w, const Tensor& y) {
  check_dtype(x, DType::F32, "linear x");
  FD_CHECK(x.shape().row_numel() == w.in,
           w.name + ": input " + x.shape().str() + " but K = " + std::to_string(w.in));
  FD_CHECK(y.rows() == x.rows() && y.shape().row_numel() == w.out,
           w.name + ": output " + y.shape().str());
}

}  // namespace

void CpuOptimizedBackend::linear(const Tensor& x, const LinearWeight& w, LinearMode mode,
                                 Tensor& y) {
  check_linear(x, w, y);
  const int64_t n = x.rows(), k = w.in;
  cpu_opt::LinearJob job{
      x.data<float>(), n, k, &w, y.data<float>(), w.out, mode.output == LinearOutput::Bf16};
  std::vector<float> prepared;
  if (mode.input == LinearInput::ActQuantFp8 || k % 8 != 0) {
    const int64_t ks = padded_cols(k);
    prepared.assign(static_cast<size_t>(n * ks), 0.0f);
    const float* src = x.data<float>();
    const bool quantise = mode.input == LinearInput::ActQuantFp8;
    parallel_units(n, 4 * k, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        if (quantise)
          kernels().act_quant_row(src + i * k, k, &prepared[i * ks]);
        else
          std::memcpy(&prepared[i * ks], src + i * k, static_cast<size_t>(k) * sizeof(float));
      }
    });
    job.x = prepared.data();
    job.x_stride = ks;
  }
  std::vector<LinearTask> tasks;
  add_linear_tasks(job, 0, w.out, tasks);
  run_linear_tasks(tasks);
}

void CpuOptimizedBackend::grouped_linear(const Tensor& x, const LinearWeight& w, int64_t groups,
                                         Tensor& y) {
  const int64_t n = x.rows(), in_g = w.in, out = w.out;
  FD_CHECK(groups > 0 && out % groups == 0, w.name + ": rows not divisible into groups");
  const int64_t out_g = out / groups, x_cols = groups * in_g, ks = padded_cols(in_g);
  FD_CHECK(x.shape().row_numel() == x_cols, w.name + ": grouped input " + x.shape().str());
  FD_CHECK(y.rows() == n && y.shape().row_numel() == out, w.name + ": grouped output");
  // Each group's slice of x as its own zero-padded [n, ks] matrix.
  std::vector<float> slices(static_cast<size_t>(groups * n * ks), 0.0f);
  const float* xd = x.data<float>();
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(&slices[(g * n + i) * ks], xd + i * x_cols + g * in_g,
                  static_cast<size_t>(in_g) * sizeof(float));
  std::vector<cpu_opt::LinearJob> jobs;
  // One chain over K as the reference's grouped linear (cpu::dot): wo_a is a BF16 einsum.
  for (int64_t g = 0; g < groups; ++g)
    jobs.push_back({&slices[g * n * ks], n, ks, &w, y.data<float>(), out, true, true});
  std::vector<LinearTask> tasks;
  for (int64_t g = 0; g < groups; ++g)
    add_linear_tasks(jobs[static_cast<size_t>(g)], g * out_g, (g + 1) * out_g, tasks);
  run_linear_tasks(tasks);
}

}  // namespace flashdesk
