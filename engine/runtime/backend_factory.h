// Chooses the compute backend by name, so the CLI and the app offer the same choices.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/ops/backend.h"

namespace flashdesk {

// "cpu" (the fastest CPU backend built), "cpu-reference" (the scalar reference), "cuda" or
// "cuda:N" (the CUDA backend on GPU 0 or N). threads <= 0: every core (CPU backends). Unknown
// names, and a GPU name with no such GPU (no driver, no GPU, a number too high), are an
// InvalidRequest that says why and offers the CPU.
std::unique_ptr<Backend> make_backend(std::string_view name, int threads = 0);
// The GPU number of "cuda" (0) or "cuda:N"; nullopt for other names. Throws InvalidRequest for a
// "cuda:" name without a number.
std::optional<int> cuda_index(std::string_view name);
// The names make_backend accepts on this machine: the CPU backends, then "cuda" and "cuda:N" for
// each GPU the CUDA runtime reports (none when CUDA is not built or there is no GPU).
std::vector<std::string> backend_names();

}  // namespace flashdesk
