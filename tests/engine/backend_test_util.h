// Shared helpers of the op tests: the backends under test (parameterisation point for the
// optimised CPU and CUDA backends), host <-> tensor copies, and error measures in dtype units.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/ops/backend.h"
#include "engine/ops/cpu/cpu_backend.h"
#include "engine/ops/cpu_opt/cpu_opt_backend.h"
#include "engine/util/numeric.h"

namespace flashdesk::test {

// The backends every op test runs on. A new backend adds itself here; its results are then
// checked against the same hand-computed and independently computed values.
inline std::vector<std::string> backend_names() {
  std::vector<std::string> names = {"cpu-reference", "cpu-reference-1t"};
  for (CpuIsa isa : supported_cpu_isas())
    names.push_back("cpu-optimized-" + std::string(cpu_isa_name(isa)));
  return names;
}

inline std::unique_ptr<Backend> make_backend(const std::string& name) {
  if (name == "cpu-reference-1t") return std::make_unique<CpuReferenceBackend>(1);
  const std::string opt = "cpu-optimized-";
  if (name.starts_with(opt)) {
    const auto isa = parse_cpu_isa(std::string_view(name).substr(opt.size()));
    EXPECT_TRUE(isa.has_value()) << name;
    return std::make_unique<CpuOptimizedBackend>(2, isa.value_or(CpuIsa::Scalar));
  }
  return std::make_unique<CpuReferenceBackend>(2);
}

class BackendTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { be_ = make_backend(GetParam()); }
  Backend& be() { return *be_; }

  template <class T>
  Tensor make(DType dtype, Shape shape, const std::vector<T>& values) {
    Tensor t = be_->alloc(dtype, shape);
    EXPECT_EQ(values.size() * sizeof(T), t.nbytes());
    be_->write(t, values.data(), t.nbytes());
    return t;
  }
  Tensor f32(Shape shape, const std::vector<float>& v) { return make(DType::F32, shape, v); }
  template <class T>
  std::vector<T> host(const Tensor& t) {
    std::vector<T> v(t.nbytes() / sizeof(T));
    be_->read(t, v.data(), t.nbytes());
    return v;
  }

 private:
  std::unique_ptr<Backend> be_;
};

#define FD_BACKEND_TEST_SUITE(Suite) \
  INSTANTIATE_TEST_SUITE_P(Backends, Suite, ::testing::ValuesIn(::flashdesk::test::backend_names()))

// One BF16 unit in the last place at the magnitude of x (2^-7 relative to the leading power of 2).
inline double bf16_ulp(double x) {
  const double a = std::fabs(x);
  if (a < 1e-30) return 1e-30;
  return std::ldexp(1.0, static_cast<int>(std::floor(std::log2(a))) - 7);
}

// |got - want| measured in BF16 ulps of want.
inline double bf16_ulps(double got, double want) {
  return std::fabs(got - want) / bf16_ulp(want);
}

// Values exactly representable in BF16, deterministic pseudo-random in [-amp, amp].
inline std::vector<float> bf16_values(size_t n, uint32_t seed, float amp = 1.0f) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 12345u;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    const float u = static_cast<float>(s >> 8) / static_cast<float>(1u << 24);
    x = round_bf16((2.0f * u - 1.0f) * amp);
  }
  return v;
}

}  // namespace flashdesk::test
