// Shared helpers of the optimised-CPU-backend tests: the configurations under test (every ISA
// this CPU supports, with 1 and 2 threads) and random weights in every stored format.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "engine/ops/cpu_opt/cpu_opt_backend.h"
#include "tests/engine/backend_test_util.h"

namespace flashdesk::test {

struct OptConfig {
  CpuIsa isa;
  int threads;
};

inline void PrintTo(const OptConfig& c, std::ostream* os) {
  *os << cpu_isa_name(c.isa) << ", " << c.threads << " thread(s)";
}

inline std::vector<OptConfig> opt_configs() {
  std::vector<OptConfig> out;
  for (CpuIsa isa : supported_cpu_isas()) {
    out.push_back({isa, 2});
    out.push_back({isa, 1});
  }
  return out;
}

inline std::string opt_config_name(const ::testing::TestParamInfo<OptConfig>& info) {
  return std::string(cpu_isa_name(info.param.isa)) + "_" + std::to_string(info.param.threads) + "t";
}

// Deterministic pseudo-random source for the tests (no global state).
class Rng {
 public:
  explicit Rng(uint32_t seed) : s_(seed * 2654435761u + 97u) {}
  uint32_t next() { return s_ = s_ * 1664525u + 1013904223u; }
  float uniform() { return static_cast<float>(next() >> 8) / static_cast<float>(1u << 24); }
  float symmetric(float amp) { return (2.0f * uniform() - 1.0f) * amp; }
  std::vector<float> floats(size_t n, float amp) {
    std::vector<float> v(n);
    for (auto& x : v) x = symmetric(amp);
    return v;
  }
  std::vector<float> bf16s(size_t n, float amp) {
    std::vector<float> v(n);
    for (auto& x : v) x = round_bf16(symmetric(amp));
    return v;
  }
  std::vector<uint8_t> bytes(size_t n) {
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = static_cast<uint8_t>(next() >> 24);
    return v;
  }

 private:
  uint32_t s_;
};

// The reference backend and an optimised one, with tensors written through the reference (both
// are host backends, so either reads the other's tensors).
class OptTest : public ::testing::TestWithParam<OptConfig> {
 protected:
  void SetUp() override {
    opt_ = std::make_unique<CpuOptimizedBackend>(GetParam().threads, GetParam().isa);
  }
  CpuReferenceBackend& ref() { return ref_; }
  CpuOptimizedBackend& opt() { return *opt_; }
  bool scalar() const { return GetParam().isa == CpuIsa::Scalar; }

  template <class T>
  Tensor make(DType dtype, Shape shape, const std::vector<T>& values) {
    Tensor t = ref_.alloc(dtype, shape);
    EXPECT_EQ(values.size() * sizeof(T), t.nbytes());
    ref_.write(t, values.data(), t.nbytes());
    return t;
  }
  Tensor f32(Shape shape, const std::vector<float>& v) { return make(DType::F32, shape, v); }
  template <class T>
  std::vector<T> host(const Tensor& t) {
    std::vector<T> v(t.nbytes() / sizeof(T));
    ref_.read(t, v.data(), t.nbytes());
    return v;
  }

  // Random weights [out, in] in a stored format (no NaN codes; realistic scale codes).
  LinearWeight weight(WeightFormat f, int64_t out, int64_t in, Rng& rng) {
    LinearWeight w;
    w.format = f;
    w.out = out;
    w.in = in;
    w.name = "random";
    switch (f) {
      case WeightFormat::Fp8Block: {
        auto codes = rng.bytes(static_cast<size_t>(out * in));
        for (auto& c : codes)
          if ((c & 0x7F) == 0x7F) c = 0x7E;  // 448 instead of NaN
        const int64_t sr = (out + 31) / 32, sc = (in + 31) / 32;
        std::vector<uint8_t> scales(static_cast<size_t>(sr * sc));
        for (auto& s : scales) s = static_cast<uint8_t>(112 + rng.next() % 12);
        w.data = make(DType::F8_E4M3, Shape{out, in}, codes);
        w.scale = make(DType::F8_E8M0, Shape{sr, sc}, scales);
        break;
      }
      case WeightFormat::Fp4Row: {
        std::vector<uint8_t> scales(static_cast<size_t>(out * in / 32));
        for (auto& s : scales) s = static_cast<uint8_t>(118 + rng.next() % 8);
        w.data = make(DType::I8, Shape{out, in / 2}, rng.bytes(static_cast<size_t>(out * in / 2)));
        w.scale = make(DType::F8_E8M0, Shape{out, in / 32}, scales);
        break;
      }
      case WeightFormat::Bf16: {
        std::vector<uint16_t> bits(static_cast<size_t>(out * in));
        for (auto& b : bits) b = f32_to_bf16(rng.symmetric(0.25f));
        w.data = make(DType::BF16, Shape{out, in}, bits);
        break;
      }
      case WeightFormat::F32:  // FP32 values (not BF16): the mixes' and promoted weights
        w.data = f32(Shape{out, in}, rng.floats(static_cast<size_t>(out * in), 0.25f));
        break;
    }
    return w;
  }

 private:
  CpuReferenceBackend ref_{2};
  std::unique_ptr<CpuOptimizedBackend> opt_;
};

#define FD_OPT_TEST_SUITE(Suite)                                                              \
  INSTANTIATE_TEST_SUITE_P(Isa, Suite, ::testing::ValuesIn(::flashdesk::test::opt_configs()), \
                           ::flashdesk::test::opt_config_name)

}  // namespace flashdesk::test
