// Maps backend names to implementations.
#include "engine/runtime/backend_factory.h"

#include <charconv>
#include <optional>

#include "engine/ops/cpu/cpu_backend.h"
#include "engine/ops/cpu_opt/cpu_opt_backend.h"
#include "engine/ops/cuda/cuda_devices.h"
#include "engine/util/error.h"

namespace flashdesk {

std::optional<int> cuda_index(std::string_view name) {
  if (name == "cuda") return 0;
  if (!name.starts_with("cuda:")) return std::nullopt;
  const std::string_view digits = name.substr(5);
  int n = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc() || end != digits.data() + digits.size() || n < 0)
    throw InvalidRequest("backend '" + std::string(name) +
                         "': the part after 'cuda:' must be a GPU number (0, 1, ...)");
  return n;
}

namespace {

std::unique_ptr<Backend> make_gpu_backend(std::string_view name, int index) {
  const std::vector<CudaDeviceInfo> gpus = cuda_devices();
  if (gpus.empty())
    throw InvalidRequest("backend '" + std::string(name) + "' needs an NVIDIA GPU, but " +
                         cuda_unavailable_reason() + ". Use --backend cpu to run on the CPU.");
  if (index >= static_cast<int>(gpus.size())) {
    std::string found;
    for (const CudaDeviceInfo& g : gpus)
      found +=
          (found.empty() ? "" : "; ") + ("cuda:" + std::to_string(g.index)) + " " + describe(g);
    throw InvalidRequest("there is no GPU " + std::to_string(index) + " (this machine has " +
                         found + ")");
  }
  return make_cuda_backend(index);
}

}  // namespace

std::vector<std::string> backend_names() {
  std::vector<std::string> names = {"cpu", "cpu-reference"};
  const std::vector<CudaDeviceInfo> gpus = cuda_devices();
  if (!gpus.empty()) names.push_back("cuda");
  for (const CudaDeviceInfo& g : gpus) names.push_back("cuda:" + std::to_string(g.index));
  return names;
}

// "cpu" is the optimised backend (SIMD chosen at run time, same bits as the reference);
// "cpu-reference" is the plain scalar one every optimised kernel is tested against; "cuda" /
// "cuda:N" the CUDA backend on GPU 0 / N.
std::unique_ptr<Backend> make_backend(std::string_view name, int threads) {
  if (name == "cpu") return std::make_unique<CpuOptimizedBackend>(threads);
  if (name == "cpu-reference") return std::make_unique<CpuReferenceBackend>(threads);
  if (const std::optional<int> gpu = cuda_index(name)) return make_gpu_backend(name, *gpu);
  std::string choices;
  for (const auto& n : backend_names()) choices += (choices.empty() ? "" : ", ") + n;
  throw InvalidRequest("unknown backend '" + std::string(name) + "' (choices: " + choices + ")");
}

}  // namespace flashdesk
