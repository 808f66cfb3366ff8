// The hybrid placement on the CUDA backend (docs/placement.md): routed experts of the later layers
// left in host memory and computed on the CPU, the rest of the model on the device. The logits
// stay those of the all-device model within its own summation-order noise against the CPU
// reference, and the host path is the one that ran. Skipped without a CUDA device (the cuda-emu
// build runs it on the emulation).
#include <gtest/gtest.h>

#include "engine/ops/cuda/cuda_devices.h"
#include "tests/engine/model_test_util.h"
#ifdef FLASHDESK_HAVE_CUDA
#include "engine/ops/cuda/cuda_backend.h"
#endif

namespace flashdesk::test {
namespace {

TEST(HybridExperts, LaterLayersExpertsOnTheCpuGiveTheSameLogits) {
#ifndef FLASHDESK_HAVE_CUDA
  GTEST_SKIP() << cuda_unavailable_reason();
#else
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  std::shared_ptr<const Checkpoint> ckpt = Checkpoint::open(every_role_model_dir());
  // Two tokens: no compressed entries yet, so no top-k choices that would amplify the FP32-order
  // differences of the device's kernels into different keys (a longer random prompt does).
  const auto ids = test_prompt(2, ckpt->config().text.vocab_size, 21);
  auto run = [&](Backend& be, int64_t host_from, std::vector<float>* next) {
    ModelOptions o;
    o.host_experts_from_layer = host_from;
    Model m(ckpt, be, o);
    SequenceState s = m.new_sequence();
    std::vector<float> l = m.prefill(s, ids, PrefillOptions{});
    *next = m.decode(s, ids[1]);
    return l;
  };
  CpuReferenceBackend cpu(1);
  std::vector<float> want_next, dev_next, hyb_next;
  const std::vector<float> want = run(cpu, -1, &want_next);
  CudaBackend device(0), hybrid(0);
  const std::vector<float> dev = run(device, -1, &dev_next);
  const std::vector<float> hyb = run(hybrid, 1, &hyb_next);
  EXPECT_EQ(device.host_moe_calls(), 0u);
  EXPECT_GT(hybrid.host_moe_calls(), 0u);
  EXPECT_LE(max_abs_diff(hyb, want), 0.02 * max_abs(want)) << "prefill";
  EXPECT_LE(max_abs_diff(hyb_next, want_next), 0.02 * max_abs(want_next)) << "decode";
  // No further from the reference than the all-device run is (beyond a small margin).
  EXPECT_LE(max_abs_diff(hyb, want), 2 * max_abs_diff(dev, want) + 1e-3 * max_abs(want));
#endif
}

}  // namespace
}  // namespace flashdesk::test
