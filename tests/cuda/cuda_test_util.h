// Shared helpers of the CUDA op tests: the two backends under comparison (the CUDA backend on
// device 0 and cpu-reference), the same inputs on both, random data, and error measures in units
// of the output dtype. Without a GPU every test is skipped with the reason (never passed).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/ops/cpu/cpu_backend.h"
#include "engine/ops/cuda/cuda_backend.h"
#include "engine/util/numeric.h"

namespace flashdesk::test {

// True in the cuda-emu build, where kernels run on a CPU emulation (slow): the full-shape tests
// then run only when FLASHDESK_EMU_FULL=1.
inline bool emulated() {
#ifdef FLASHDESK_CUDA_EMU
  return true;
#else
  return false;
#endif
}

// First line of a test at the full V4.1 shapes: on the CPU emulation those take minutes each, so
// they run there only with FLASHDESK_EMU_FULL=1.
#define FD_REQUIRE_FULL_SHAPES()                                                 \
  do {                                                                           \
    if (::flashdesk::test::emulated() && !std::getenv("FLASHDESK_EMU_FULL"))     \
      GTEST_SKIP() << "full V4.1 shapes run on a GPU; on the CPU emulation set " \
                      "FLASHDESK_EMU_FULL=1 (slow)";                             \
  } while (0)

class CudaOpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
    gpu_ = std::make_unique<CudaBackend>(0);
    cpu_ = std::make_unique<CpuReferenceBackend>(
        static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  }

  CudaBackend& gpu() { return *gpu_; }
  CpuReferenceBackend& cpu() { return *cpu_; }

  // The same bytes on the GPU (first) and the CPU reference (second).
  struct Pair {
    Tensor gpu, cpu;
  };
  template <class T>
  Pair both(DType dtype, Shape shape, const std::vector<T>& values) {
    Pair p{gpu_->alloc(dtype, shape), cpu_->alloc(dtype, shape)};
    EXPECT_EQ(values.size() * sizeof(T), p.gpu.nbytes());
    gpu_->write(p.gpu, values.data(), p.gpu.nbytes());
    cpu_->write(p.cpu, values.data(), p.cpu.nbytes());
    return p;
  }
  Pair both_f32(Shape shape, const std::vector<float>& v) { return both(DType::F32, shape, v); }
  Pair both_alloc(DType dtype, Shape shape) {
    return {gpu_->alloc(dtype, shape), cpu_->alloc(dtype, shape)};
  }
  // A device tensor poisoned with NaN bytes, so an element a kernel forgot to write shows.
  Tensor gpu_poisoned(DType dtype, Shape shape) {
    Tensor t = gpu_->alloc(dtype, shape);
    std::vector<uint8_t> nan(t.nbytes(), 0xFF);
    gpu_->write(t, nan.data(), nan.size());
    return t;
  }
  template <class T>
  std::vector<T> host(Backend& be, const Tensor& t) {
    std::vector<T> v(t.nbytes() / sizeof(T));
    be.read(t, v.data(), t.nbytes());
    return v;
  }
  template <class T>
  std::vector<T> from_gpu(const Tensor& t) {
    return host<T>(*gpu_, t);
  }
  template <class T>
  std::vector<T> from_cpu(const Tensor& t) {
    return host<T>(*cpu_, t);
  }

 private:
  std::unique_ptr<CudaBackend> gpu_;
  std::unique_ptr<CpuReferenceBackend> cpu_;
};

// ---- random inputs (deterministic by seed) ----

// BF16-exact values, normal-ish around 0 with the given standard deviation.
inline std::vector<float> random_bf16(size_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = round_bf16(dist(rng));
  return v;
}

inline std::vector<float> random_uniform(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// FP8 E4M3 codes of random weights (no NaN codes 0x7F / 0xFF).
inline std::vector<uint8_t> random_e4m3(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& c : v) {
    c = static_cast<uint8_t>(rng() & 0xFF);
    if ((c & 0x7F) == 0x7F) c ^= 0x01;
  }
  return v;
}

inline std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& c : v) c = static_cast<uint8_t>(rng() & 0xFF);
  return v;
}

// UE8M0 scale codes around 2^centre (codes 127 + centre - spread .. 127 + centre + spread).
inline std::vector<uint8_t> random_e8m0(size_t n, uint32_t seed, int centre, int spread = 2) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& c : v)
    c = static_cast<uint8_t>(127 + centre + static_cast<int>(rng() % (2 * spread + 1)) - spread);
  return v;
}

// ---- error measures ----

// One BF16 unit in the last place at the magnitude of x (2^-7 relative to its power of two).
inline double bf16_ulp_at(double x) {
  const double a = std::fabs(x);
  if (a < 1e-30) return 1e-30;
  return std::ldexp(1.0, static_cast<int>(std::floor(std::log2(a))) - 7);
}

inline double rms(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += double(x) * x;
  return v.empty() ? 0.0 : std::sqrt(s / static_cast<double>(v.size()));
}

// One line per comparison with its worst error, so a run's log records the figures, not only
// pass or fail.
inline void report_error(const std::string& what, double worst, const char* unit, size_t n) {
  std::printf("[ measure  ] %s: worst %.3g %s over %zu values\n", what.c_str(), worst, unit, n);
}

// Every got[i] within max_ulps BF16 ulps of want[i], measured at the larger of |want[i]| and
// `floor` (sums that cancel to near zero are judged at the scale of their terms, not of their
// result). Reports the worst element and how many exceed.
inline void expect_bf16_close(const std::vector<float>& got, const std::vector<float>& want,
                              double max_ulps, double floor, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0, worst_i = 0;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double ulps =
        std::isnan(got[i]) != std::isnan(want[i])
            ? 1e30
            : (std::isnan(got[i]) ? 0.0
                                  : std::fabs(double(got[i]) - want[i]) /
                                        bf16_ulp_at(std::max(std::fabs(double(want[i])), floor)));
    if (ulps > worst) worst = ulps, worst_i = i;
    if (ulps > max_ulps) ++bad;
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " elements beyond "
                     << max_ulps << " bf16 ulps; worst [" << worst_i << "] got " << got[worst_i]
                     << " want " << want[worst_i] << " (" << worst << " ulps)";
  report_error(what, worst, "bf16 ulps", got.size());
}

// |got - want| <= tol for every element (FP32 outputs).
inline void expect_abs_close(const std::vector<float>& got, const std::vector<float>& want,
                             double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0, worst_i = 0;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::isnan(got[i]) || std::isnan(want[i]) ? 1e30 : std::fabs(got[i] - want[i]);
    if (d > worst) worst = d, worst_i = i;
    if (d > tol) ++bad;
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " beyond " << tol
                     << "; worst [" << worst_i << "] got " << got[worst_i] << " want "
                     << want[worst_i];
  report_error(what, worst, "absolute", got.size());
}

template <class T>
void expect_identical(const std::vector<T>& got, const std::vector<T>& want,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0, first = got.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      if (bad++ == 0) first = i;
    }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " differ; first at ["
                     << first << "] got " << +got[first] << " want " << +want[first];
  report_error(what, static_cast<double>(bad), "elements differ", got.size());
}

}  // namespace flashdesk::test
