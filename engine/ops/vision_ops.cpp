// make_vision_ops: the implementation that belongs to the backend (vision_ops.h).
#include "engine/ops/vision_ops.h"

#include <string>

#include "engine/util/error.h"

namespace flashdesk {

std::unique_ptr<VisionOps> make_vision_ops(Backend& backend) {
  if (auto ops = make_cpu_vision_ops(backend)) return ops;
  if (auto ops = make_cuda_vision_ops(backend)) return ops;
  throw InvalidRequest("backend '" + std::string(backend.name()) + "' has no vision ops");
}

}  // namespace flashdesk
