// Maps backend names to implementations.
#include "engine/runtime/backend_factory.h"

#include "engine/ops/cpu/cpu_backend.h"
#include "engine/ops/cpu_opt/cpu_opt_backend.h"
#include "engine/util/error.h"

namespace flashdesk {

std::vector<std::string> backend_names() {
  return {"cpu", "cpu-reference"};
}

// "cpu" is the optimised backend (SIMD chosen at run time, same bits as the reference);
// "cpu-reference" is the plain scalar one every optimised kernel is tested against.
std::unique_ptr<Backend> make_backend(std::string_view name, int threads) {
  if (name == "cpu") return std::make_unique<CpuOptimizedBackend>(threads);
  if (name == "cpu-reference") return std::make_unique<CpuReferenceBackend>(threads);
  std::string choices;
  for (const auto& n : backend_names()) choices += (choices.empty() ? "" : ", ") + n;
  throw InvalidRequest("unknown backend '" + std::string(name) + "' (choices: " + choices + ")");
}

}  // namespace flashdesk
