// The golden files, the regenerated every-role checkpoint and the comparison measures shared by
// the golden tests.
#include "tests/engine/golden_test_util.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/random_checkpoint.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/ops/cuda/cuda_devices.h"
#include "engine/runtime/backend_factory.h"
#include "engine/util/numeric.h"
#include "engine/util/sha256.h"
#include "tests/engine/checkpoint_test_util.h"

namespace flashdesk::test {

std::string file_sha256(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  Sha256 h;
  std::vector<char> buf(1 << 20);
  while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount() > 0)
    h.update(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(buf.data()),
                                      static_cast<size_t>(in.gcount())));
  return Sha256::hex(h.finish());
}

namespace {

// SHA-256 over the tensors in name order (name, then raw bytes): tools/make_goldens.py's
// tensors_sha256, the content whatever the header's layout.
std::string tensors_sha256(const std::filesystem::path& path) {
  SafetensorsFile f(path);
  std::vector<const SafetensorsEntry*> entries;
  for (const SafetensorsEntry& e : f.tensors()) entries.push_back(&e);
  std::sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->name < b->name; });
  Sha256 h;
  for (const SafetensorsEntry* e : entries) {
    h.update(e->name);
    h.update(std::span<const uint8_t>(f.data(*e), static_cast<size_t>(e->nbytes)));
  }
  return Sha256::hex(h.finish());
}

nlohmann::json read_manifest() {
  std::ifstream in(golden_dir("every-role") / "manifest.json");
  return nlohmann::json::parse(in);
}

}  // namespace

std::filesystem::path golden_dir(const std::string& name) {
  return std::filesystem::path(FD_SOURCE_DIR) / "tests/data/goldens" / name;
}

const std::filesystem::path& golden_every_role_model() {
  static ::flashdesk::testing::TempDir dir;
  static const nlohmann::json manifest = [] {
    const nlohmann::json m = read_manifest();
    RandomCheckpointOptions o;
    o.seed = m.at("make_random_seed").get<uint64_t>();
    write_random_checkpoint(
        std::filesystem::path(FD_SOURCE_DIR) / m.at("config").get<std::string>(), dir.path(), o);
    return m;
  }();
  const char* why =
      " differs from the checkpoint the goldens were made from: the random writer (or the "
      "Engram multipliers it writes) changed; regenerate them (docs/goldens.md)";
  for (const auto& [file, digest] : manifest.at("sha256").items())
    EXPECT_EQ(file_sha256(dir.path() / file), digest.get<std::string>()) << file << why;
  for (const auto& [file, digest] : manifest.at("tensors_sha256").items())
    EXPECT_EQ(tensors_sha256(dir.path() / file), digest.get<std::string>()) << file << why;
  return dir.path();
}

ErrSums block_error(const std::vector<float>& gold, const std::vector<float>& eng,
                    const std::vector<float>& embed, const Layout& x, int64_t l,
                    const std::vector<int64_t>& run) {
  ErrSums e;
  for (int64_t s = 0; s < x.S; ++s)
    for (int64_t r = 0; r < x.R; ++r) {
      if (!run.empty() && run[static_cast<size_t>(l * x.R + r)] == 0) continue;
      for (int64_t k = 0; k < x.hc; ++k)
        for (int64_t d = 0; d < x.D; ++d) {
          const double g = gold[x.at(s, l, r) + static_cast<size_t>(k * x.D + d)];
          const double in = l == 0 ? embed[static_cast<size_t>((s * x.R + r) * x.D + d)]
                                   : gold[x.at(s, l - 1, r) + static_cast<size_t>(k * x.D + d)];
          const double diff = eng[x.at(s, l, r) + static_cast<size_t>(k * x.D + d)] - g;
          e.num += diff * diff;
          e.den += (g - in) * (g - in);
        }
    }
  return e;
}

NamedTensors load_golden(const std::filesystem::path& path) {
  SafetensorsFile f(path);
  NamedTensors out;
  for (const SafetensorsEntry& e : f.tensors()) {
    HostTensor t{e.dtype, e.shape, {}};
    t.bytes.assign(f.data(e), f.data(e) + e.nbytes);
    if (e.dtype == DType::BF16) {
      HostTensor wide = HostTensor::zeros(DType::F32, e.shape);
      auto dst = wide.as<float>();
      auto src = t.as<uint16_t>();
      for (size_t i = 0; i < src.size(); ++i) dst[i] = bf16_to_f32(src[i]);
      t = std::move(wide);
    }
    out.emplace(e.name, std::move(t));
  }
  return out;
}

std::vector<float> floats(const NamedTensors& t, const std::string& name) {
  auto it = t.find(name);
  if (it == t.end() || it->second.dtype != DType::F32) {
    ADD_FAILURE() << "golden tensor " << name << " missing or not F32";
    return {};
  }
  auto v = it->second.as<float>();
  return {v.begin(), v.end()};
}

std::vector<int64_t> ints(const NamedTensors& t, const std::string& name) {
  auto it = t.find(name);
  if (it == t.end() || it->second.dtype != DType::I64) {
    ADD_FAILURE() << "golden tensor " << name << " missing or not I64";
    return {};
  }
  auto v = it->second.as<int64_t>();
  return {v.begin(), v.end()};
}

std::vector<int32_t> ids(const NamedTensors& t, const std::string& name) {
  std::vector<int32_t> out;
  for (int64_t v : ints(t, name)) out.push_back(static_cast<int32_t>(v));
  return out;
}

BackendModel load_on(const std::filesystem::path& dir, const std::string& backend) {
  BackendModel m;
  m.backend = make_backend(backend, 2);
  m.model = std::make_unique<Model>(Checkpoint::open(dir), *m.backend);
  return m;
}

double rms(std::span<const double> x) {
  if (x.empty()) return 0.0;
  double s = 0;
  for (double v : x) s += v * v;
  return std::sqrt(s / static_cast<double>(x.size()));
}

double relative_rms(std::span<const float> a, std::span<const float> b) {
  std::vector<double> diff(a.size()), ref(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    diff[i] = double(b[i]) - double(a[i]);
    ref[i] = a[i];
  }
  const double den = rms(ref);
  return den > 0 ? rms(diff) / den : (rms(diff) == 0 ? 0.0 : INFINITY);
}

std::vector<std::string> golden_backends() {
  std::vector<std::string> names = {"cpu-reference", "cpu"};
  if (!cuda_devices().empty()) names.push_back("cuda");
  return names;
}

std::string backend_mode_name(const ::testing::TestParamInfo<BackendMode>& p) {
  std::string name = std::get<0>(p.param) + "_" + std::get<1>(p.param);
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

int64_t argmax(std::span<const float> row) {
  return std::max_element(row.begin(), row.end()) - row.begin();
}

}  // namespace flashdesk::test
