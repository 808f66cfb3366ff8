// Shared by the golden tests (docs/goldens.md): the oracle's golden files under
// tests/data/goldens/, the every-role checkpoint they were made from regenerated with the C++
// writer, and the measures of tools/compare_logits.py.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "engine/model/dump_recorder.h"
#include "engine/model/model.h"
#include "engine/ops/backend.h"

namespace flashdesk::test {

// Shape of a block_out tensor: [S, L, R, hc, D] (the prefill has S = 1, R = P; decode S = T, R =
// 1).
struct Layout {
  int64_t S, L, R, hc, D;
  size_t at(int64_t s, int64_t l, int64_t r) const {
    return static_cast<size_t>(((s * L + l) * R + r) * hc * D);
  }
};

// Sums of squares of (eng - gold) and (gold - input) of one block over some rows: their ratio's
// square root is RMS(eng - gold) / RMS(gold - input), and sums over row sets pool.
struct ErrSums {
  double num = 0, den = 0;
  double ratio() const { return den > 0 ? std::sqrt(num / den) : (num == 0 ? 0.0 : INFINITY); }
  ErrSums operator+(const ErrSums& o) const { return {num + o.num, den + o.den}; }
};

// Block l's error sums over the rows it ran (run [L, R], empty = all); block 0's input is the
// embedding `embed` [S, R, D] copied to every stream.
ErrSums block_error(const std::vector<float>& gold, const std::vector<float>& eng,
                    const std::vector<float>& embed, const Layout& x, int64_t l,
                    const std::vector<int64_t>& run);

// Hex SHA-256 of a file's bytes.
std::string file_sha256(const std::filesystem::path& path);

// FD_SOURCE_DIR/tests/data/goldens/<name>
std::filesystem::path golden_dir(const std::string& name);

// The checkpoint of tests/data/goldens/every-role/manifest.json: write_random_checkpoint with the
// manifest's seed (its Engram map holds the official multipliers), made once per binary. Fails
// the calling test (with a "regenerate the goldens" message) when its SHA-256 differs from the
// manifest's, i.e. when the writer changed since the goldens were made.
const std::filesystem::path& golden_every_role_model();

// Every tensor of a golden safetensors file; BF16 tensors are widened to F32 (exact).
NamedTensors load_golden(const std::filesystem::path& path);
std::vector<float> floats(const NamedTensors& t, const std::string& name);
std::vector<int64_t> ints(const NamedTensors& t, const std::string& name);
std::vector<int32_t> ids(const NamedTensors& t, const std::string& name);

// A model of `dir` on the backend `backend` ("cpu-reference" or "cpu", backend_factory.h).
struct BackendModel {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
};
BackendModel load_on(const std::filesystem::path& dir, const std::string& backend);

// sqrt(mean(x^2)) in double.
double rms(std::span<const double> x);
// RMS(b - a) / RMS(a).
double relative_rms(std::span<const float> a, std::span<const float> b);

// The golden tests run on every backend of this machine in both prefill modes: (backend, prefill
// mode). The CPU backends always; "cuda" too when there is a GPU (evaluated when the tests are
// registered, in main, not during static initialisation).
using BackendMode = std::tuple<std::string, std::string>;
std::vector<std::string> golden_backends();
inline auto backends_and_modes() {
  return ::testing::Combine(::testing::ValuesIn(golden_backends()),
                            ::testing::Values("exact", "bounded"));
}
std::string backend_mode_name(const ::testing::TestParamInfo<BackendMode>& p);

// Index of the largest value (lowest index on ties, as the logits files' argmax).
int64_t argmax(std::span<const float> row);

}  // namespace flashdesk::test
