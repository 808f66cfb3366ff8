// Blas::gemm_nt (blas.h): a product offered to the step open on its stream first (step_ops.h), so
// a replayed step takes it (the recorded graph holds the library's kernels for the same call) and
// a captured one can issue it again.
#include <cstring>
#include <vector>

#include "engine/ops/cuda/blas.h"
#include "engine/ops/cuda/step_ops.h"

namespace flashdesk::cuda {
namespace {

// The fields one after another (GemmArgs has padding, whose bytes are not the call's).
std::vector<unsigned char> call_bytes(const GemmArgs& a) {
  std::vector<unsigned char> out;
  auto put = [&](const auto& v) {
    const auto* p = reinterpret_cast<const unsigned char*>(&v);
    out.insert(out.end(), p, p + sizeof(v));
  };
  put(a.in), put(a.rows), put(a.cols), put(a.k), put(a.x), put(a.ldx), put(a.w), put(a.ldw);
  put(a.out), put(a.y), put(a.ldy), put(a.batch), put(a.stride_x), put(a.stride_w);
  put(a.stride_y);
  return out;
}

}  // namespace

void Blas::gemm_nt(const GemmArgs& a) {
  const cudaStream_t stream = stream_;
  StepOpSink* sink = step_sink(stream);
  StepOffer offer = StepOffer::Issue;
  if (sink) {
    const std::vector<unsigned char> bytes = call_bytes(a);
    StepOpKey key;
    key.kind = StepOpKind::Library;
    key.stream = stream;
    key.target = "cublas gemm";
    key.params = bytes;
    key.name = "cublas gemm";
    offer = sink->offer(key);
    if (offer == StepOffer::Taken) return;
  }
  issue_gemm(a);
  if (offer == StepOffer::IssueAndKeep)
    sink->keep_reissue([this, a, stream] {
      use_stream(stream);
      issue_gemm(a);
    });
}

}  // namespace flashdesk::cuda
