// Chooses the compute backend by name, so the CLI and the app offer the same choices.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/ops/backend.h"

namespace flashdesk {

// "cpu" (the fastest CPU backend built), "cpu-reference" (the scalar reference). threads <= 0:
// every core. Unknown names are an InvalidRequest listing the choices.
std::unique_ptr<Backend> make_backend(std::string_view name, int threads = 0);
std::vector<std::string> backend_names();

}  // namespace flashdesk
