// Everything one CudaBackend owns on its device: the stream all its ops run on, the memory pool
// and weight arena, cuBLAS, and helpers the op files share (host metadata uploads, launch sizes).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/ops/cuda/beside_lane.h"
#include "engine/ops/cuda/blas.h"
#include "engine/ops/cuda/cuda_handles.h"
#include "engine/ops/cuda/device_memory.h"
#include "engine/ops/cuda/gemv_kernels.h"
#include "engine/ops/cuda/step_graph.h"
#include "engine/ops/cuda/wgmma_experts.h"
#include "engine/ops/tensor.h"

namespace flashdesk::cuda {

class DeviceContext {
 public:
  explicit DeviceContext(int device);

  int device() const { return device_; }
  const cudaDeviceProp& props() const { return props_; }
  // The stream the ops issue to: the main one, or the beside lane's while a section is open.
  cudaStream_t stream() const { return beside_open_ ? beside_.stream() : stream_.get(); }
  cudaStream_t main_stream() const { return stream_.get(); }
  int multiprocessors() const { return props_.multiProcessorCount; }
  DevicePool& pool() { return *pool_; }
  WeightArena& weights() { return weights_; }
  Blas& blas() {
    blas_.use_stream(stream());
    return blas_;
  }

  // Backend::beside_begin / beside_end / join (beside_lane.h).
  void beside_begin();
  int64_t beside_end();
  void join(int64_t id);
  bool beside_open() const { return beside_open_; }
  // Waits for the main stream and the beside lane.
  void synchronize();

  // Step graphs (step_graph.h): the ops between step_begin and step_end are captured and launched
  // as graphs. A host wait inside a step goes between host_wait_begin (launches what was captured
  // so far) and host_wait_end (captures the rest).
  void step_begin();
  void step_end();
  void step_abort();
  bool in_step() const { return graph_.in_step(); }
  void host_wait_begin();
  void host_wait_end();
  // Inside a step graph: launches what was captured so far, so that the device runs it while the
  // host works on something else; the rest of the step is a new segment. Elsewhere: nothing.
  void step_cut();
  const StepGraphCounts& graph_counts() const { return graph_.counts(); }
  void relaunch_last_step() { graph_.relaunch_last(); }
  void set_step_replay(bool on) { graph_.set_replay(on); }

  // A device tensor from the pool; contents undefined (held by the beside lane until its join
  // where a section is open).
  Tensor scratch(DType dtype, Shape shape);
  // A device copy of host values, ordered on the stream (the host buffer may be reused at once).
  Tensor upload_host(DType dtype, Shape shape, const void* data);
  // Where a host-to-device copy of `bytes` at `data` issued now should read from: `data`, or while
  // a step is captured a pinned copy (a captured copy reads its source when the graph runs).
  const void* host_source(const void* data, size_t bytes);
  template <class T>
  Tensor upload_span(std::span<const T> v, DType dtype) {
    return upload_host(dtype, Shape{static_cast<int64_t>(v.size())}, v.data());
  }
  // Host bytes kept on the device under `key` and their size (e.g. the experts of a layer):
  // uploaded again only when the bytes differ from the last upload under that key. The key must
  // outlive the context's use of it (a model's weights, not a caller's temporary: each new address
  // would keep another upload).
  Tensor upload_cached(const void* key, const void* data, size_t bytes);
  // At least `count` arrival counters that are zero on the stream now: the kernels whose last
  // block to finish a piece of work combines it (split sums, the experts' ordered sum, the mHC
  // mixes) count arrivals here and the combining block sets its counter back to zero, so the
  // next kernel on the stream finds them zero again without a memset launch. One stream runs
  // the kernels one after another, so they can all share the buffer.
  unsigned* arrival_counters(int64_t count);

  // The backend's GEMV kernel switch, here because the linear paths see the context only.
  GemvKernels gemv_kernels() const { return gemv_kernels_; }
  void set_gemv_kernels(GemvKernels k) { gemv_kernels_ = k; }
  // Warps splitting a tile's K units in the tensor-core decode experts' down kernel (4 or 2;
  // moe_decode_tc.cu), the backend's switch.
  int down_split() const { return down_split_; }
  void set_down_split(int warps) { down_split_ = warps; }
  // Blocks a multiprocessor of the one-row down kernel with two warps a tile: 10 or 8.
  int down_blocks() const { return down_blocks_; }
  void set_down_blocks(int blocks) { down_blocks_ = blocks; }
  // Whether the tensor-core decode kernels (the experts, the dense FP8 linears) hand a tile's K
  // units to its warps interleaved rather than as contiguous ranges (tc_codes.cuh UnitSeq); the
  // backend's switch.
  bool interleaved_units() const { return interleaved_units_; }
  void set_interleaved_units(bool on) { interleaved_units_ = on; }
  // Where the FP8 GEMV (CUDA cores) decodes its codes by the hardware's E4M3 conversion
  // (gemv_kernels.h); the backend's switch.
  Fp8Conversion fp8_conversion() const { return fp8_conversion_; }
  void set_fp8_conversion(Fp8Conversion c) { fp8_conversion_ = c; }
  // Whether the prefill experts may run Hopper's wgmma kernels (moe_grouped_sm90a.cu) where this
  // binary has them for the device, and in which CTA widths; the backend's switch.
  WgmmaExperts wgmma_experts() const { return wgmma_experts_; }
  void set_wgmma_experts(WgmmaExperts w) { wgmma_experts_ = w; }
  // Whether those kernels size a tile's products to its pairs (else 128 a tile); the backend's
  // switch.
  bool wgmma_fitted_products() const { return wgmma_fitted_products_; }
  void set_wgmma_fitted_products(bool on) { wgmma_fitted_products_ = on; }

 private:
  int device_;
  cudaDeviceProp props_{};
  Stream stream_;
  std::shared_ptr<DevicePool> pool_;
  WeightArena weights_;
  Blas blas_;
  struct Cached {
    std::vector<uint8_t> bytes;
    Tensor tensor;
  };
  std::map<std::pair<const void*, size_t>, Cached> cached_;
  Tensor counters_;
  GemvKernels gemv_kernels_ = GemvKernels::Auto;
  int down_split_ = 2;
  int down_blocks_ = 10;
  bool interleaved_units_ = true;
  Fp8Conversion fp8_conversion_ = Fp8Conversion::All;
  WgmmaExperts wgmma_experts_ = WgmmaExperts::Auto;
  bool wgmma_fitted_products_ = true;
  BesideLane beside_{*pool_};  // destroyed before the pool
  bool beside_open_ = false;
  StepGraph graph_;  // last: its executable graphs go first
};

// Kernels launched by every CUDA backend of the process so far (FD_LAUNCH counts them; a cuBLAS
// product counts as one): benches divide by layers for "kernels per layer".
uint64_t kernels_launched();
void count_kernel_launch(const char* name);

// The host's clock at each launch while a trace is open (one thread's launches; the benchmarks'
// "where the host's time goes"): what the host did between two launches shows as the time
// between them. Off, a launch pays one relaxed load.
struct HostLaunch {
  const char* name;
  int64_t ns;  // steady clock
};
void host_launch_trace_begin();
std::vector<HostLaunch> host_launch_trace_end();
// Records `name` in an open trace without counting a launch: the host's other device calls that
// may wait for the device (cudaMalloc, cudaFree, a read back).
void trace_host_event(const char* name);

}  // namespace flashdesk::cuda
