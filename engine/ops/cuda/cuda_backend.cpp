// The CUDA backend's construction and memory ops: allocation from the pool, host <-> device
// copies, row gathers and scatters as runs of device copies, weight uploads into the arena in
// their stored formats.
#include "engine/ops/cuda/cuda_backend.h"
#include "engine/ops/cuda/moe_grouped.h"

#include "engine/ops/cpu_opt/cpu_opt_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/ops/cuda/device_context.h"
#include "engine/ops/cuda/row_copy.h"
#include "engine/ops/cuda/step_ops.h"
#include "engine/util/numeric.h"

namespace flashdesk {
namespace {

Shape shape_of(const TensorView& t) {
  FD_CHECK(t.shape.size() <= static_cast<size_t>(Shape::kMaxRank),
           std::string(t.name) + ": more than 4 dimensions");
  switch (t.shape.size()) {
    case 0:
      return Shape{1};
    case 1:
      return Shape{t.dim(0)};
    case 2:
      return Shape{t.dim(0), t.dim(1)};
    case 3:
      return Shape{t.dim(0), t.dim(1), t.dim(2)};
    default:
      return Shape{t.dim(0), t.dim(1), t.dim(2), t.dim(3)};
  }
}

size_t row_bytes(const Tensor& t) {
  return static_cast<size_t>(t.shape().row_numel()) * dtype_size(t.dtype());
}

// Copies rows src_rows[i] -> dst_rows[i], one device copy per run of consecutive pairs (a window
// ring update is one or two runs, a bounded-replay cut one run per sequence).
void copy_row_runs(cudaStream_t stream, const Tensor& src, std::span<const int64_t> src_rows,
                   Tensor& dst, std::span<const int64_t> dst_rows, size_t rb) {
  size_t i = 0;
  while (i < src_rows.size()) {
    size_t j = i + 1;
    while (j < src_rows.size() && src_rows[j] == src_rows[j - 1] + 1 &&
           dst_rows[j] == dst_rows[j - 1] + 1)
      ++j;
    cuda::copy_async(dst.bytes() + static_cast<size_t>(dst_rows[i]) * rb,
                     src.bytes() + static_cast<size_t>(src_rows[i]) * rb, (j - i) * rb,
                     cudaMemcpyDeviceToDevice, stream);
    i = j;
  }
}

// The value of the environment switch `name`, one of `allowed` (anything else is refused with
// the list), or nothing where it is unset.
std::optional<std::string> read_choice(const char* name,
                                       std::initializer_list<std::string_view> allowed) {
  const char* value = std::getenv(name);
  if (!value) return std::nullopt;
  const std::string v(value);
  bool known = false;
  std::string listed;
  size_t i = 0;
  for (std::string_view a : allowed) {
    known = known || a == v;
    listed += (i == 0 ? "" : i + 1 == allowed.size() ? " or " : ", ") + std::string(a);
    ++i;
  }
  FD_CHECK(known, std::string(name) + " must be " + listed + ", not '" + v + "'");
  return v;
}

// A 0|1 switch from the environment into `flag`; unset leaves the default.
void read_switch(const char* name, bool& flag) {
  if (const auto v = read_choice(name, {"0", "1"})) flag = *v == "1";
}

// A count from the environment into `count` (the whole value a number >= 0); unset leaves the
// default.
void read_count(const char* name, int64_t& count) {
  const char* v = std::getenv(name);
  if (!v) return;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  FD_CHECK(end != v && *end == '\0' && n >= 0,
           std::string(name) + " must be a count of 0 or more, not '" + v + "'");
  count = n;
}

void expect_device(const Tensor& t, const char* op) {
  FD_CHECK(t.defined() && !t.host_accessible(),
           std::string(op) + ": tensor is not device memory of the CUDA backend");
}

}  // namespace

CudaBackend::CudaBackend(int device) {
  const std::vector<CudaDeviceInfo> devices = cuda_devices();
  if (device < 0 || device >= static_cast<int>(devices.size()))
    throw InvalidRequest(devices.empty() ? "no CUDA device: " + cuda_unavailable_reason()
                                         : "no CUDA device " + std::to_string(device) + " (" +
                                               std::to_string(devices.size()) + " found)");
  info_ = devices[static_cast<size_t>(device)];
  name_ = "cuda:" + std::to_string(device);
  ctx_ = std::make_unique<cuda::DeviceContext>(device);
  // FLASHDESK_CUDA_TENSOR_CORES=none|attention|moe|all (default all): which prefill paths run on
  // the tensor cores, for comparing them with the CUDA-core and cuBLAS paths they replace (the
  // indexer's scores only with all).
  if (const auto tc =
          read_choice("FLASHDESK_CUDA_TENSOR_CORES", {"none", "attention", "moe", "all"})) {
    const std::string& v = *tc;
    attention_tensor_cores_ = v == "attention" || v == "all";
    grouped_moe_ = v == "moe" || v == "all";
    if (v != "all") indexer_kernels_ = IndexerKernels::CudaCores;
  }
  // FLASHDESK_CUDA_INDEXER=auto|tensor-cores|cuda-cores (default auto): which kernel scores the
  // indexer's rows (the benchmarks' A/B).
  if (const auto k =
          read_choice("FLASHDESK_CUDA_INDEXER", {"auto", "tensor-cores", "cuda-cores"})) {
    const std::string& v = *k;
    indexer_kernels_ = v == "tensor-cores" ? IndexerKernels::TensorCores
                       : v == "cuda-cores" ? IndexerKernels::CudaCores
                                           : IndexerKernels::Auto;
  }
  // FLASHDESK_CUDA_INDEX_KEYS=decoded|per-tile (default decoded): set_index_keys_decoded (the
  // benchmarks' A/B).
  if (const auto k = read_choice("FLASHDESK_CUDA_INDEX_KEYS", {"decoded", "per-tile"}))
    index_keys_decoded_ = *k == "decoded";
  // FLASHDESK_CUDA_MOE_DECODE=tc|cuda-cores (default tc): which kernels run the decode experts
  // where both can (the benchmarks' A/B).
  if (const auto d = read_choice("FLASHDESK_CUDA_MOE_DECODE", {"tc", "cuda-cores"}))
    decode_experts_tc_ = *d == "tc";
  // FLASHDESK_CUDA_GEMV=auto|tc|cuda-cores (default auto): which kernels run the dense FP8
  // linears of up to 8 rows where both can (the benchmarks' A/B).
  if (const auto d = read_choice("FLASHDESK_CUDA_GEMV", {"auto", "tc", "cuda-cores"})) {
    const std::string& v = *d;
    set_gemv_kernels(v == "tc"           ? GemvKernels::TensorCores
                     : v == "cuda-cores" ? GemvKernels::CudaCores
                                         : GemvKernels::Auto);
  }
  read_graph_switches();
  // FLASHDESK_CUDA_MOE_PARTS=1 splits the decode experts' FP8 shared slot into byte-balanced
  // parts (opt-in: its full-wave form has not run on a GPU yet; docs/cuda-backend.md).
  if (const char* parts = std::getenv("FLASHDESK_CUDA_MOE_PARTS"))
    balance_shared_expert_ = std::string(parts) == "1";
  // FLASHDESK_CUDA_SHARED_AHEAD=0|1 (default 0): at decode sizes the model computes the shared
  // expert beside the gate and the router (Backend::shared_expert_beside_router).
  read_switch("FLASHDESK_CUDA_SHARED_AHEAD", shared_ahead_);
  // FLASHDESK_CUDA_MOE_SPLIT=0|1 (default 1): the tensor-core decode experts run the FP8 shared
  // slot as parts over K, each about a routed FP4 expert's bytes (the benchmarks' A/B).
  read_switch("FLASHDESK_CUDA_MOE_SPLIT", split_shared_tc_);
  // FLASHDESK_CUDA_SELECT_RUNS=0|1 (default 0): set_select_runs (the benchmarks' A/B).
  read_switch("FLASHDESK_CUDA_SELECT_RUNS", select_runs_);
  // FLASHDESK_CUDA_SELECT_WARP_TAIL=0|1 (default 1): set_select_warp_tail (the benchmarks' A/B).
  read_switch("FLASHDESK_CUDA_SELECT_WARP_TAIL", select_warp_tail_);
  // FLASHDESK_CUDA_SELECT_STOP_MASKS=0|1 (default 1): set_select_stop_masks (the benchmarks' A/B).
  read_switch("FLASHDESK_CUDA_SELECT_STOP_MASKS", select_stop_masks_);
  // FLASHDESK_CUDA_HEAP_STEPS=thread|warp|in-place (default thread): set_heap_steps (the A/B).
  if (const auto h = read_choice("FLASHDESK_CUDA_HEAP_STEPS", {"thread", "warp", "in-place"}))
    heap_steps_ = *h == "warp"       ? HeapSteps::Warp
                  : *h == "in-place" ? HeapSteps::InPlace
                                     : HeapSteps::Thread;
  // FLASHDESK_CUDA_SELECT_SPLIT=0|1 (default 1): set_select_split (the benchmarks' A/B).
  read_switch("FLASHDESK_CUDA_SELECT_SPLIT", select_split_);
  // FLASHDESK_CUDA_SCORE_PAIRS_FROM=N (default 262,144): set_score_pairs_from (the A/B).
  read_count("FLASHDESK_CUDA_SCORE_PAIRS_FROM", score_pairs_from_);
  // FLASHDESK_CUDA_SELECT_THREADS=N (default 128): set_prefill_select_threads (the A/B).
  int64_t select_threads = prefill_select_threads_;
  read_count("FLASHDESK_CUDA_SELECT_THREADS", select_threads);
  set_prefill_select_threads(static_cast<int>(std::min<int64_t>(select_threads, 1 << 20)));
  // FLASHDESK_CUDA_INDEXER_BESIDE=0|1 (default 0): set_indexer_beside_query (the benchmarks' A/B).
  read_switch("FLASHDESK_CUDA_INDEXER_BESIDE", indexer_beside_);
  // FLASHDESK_CUDA_DRAW_WEIGHTS=0|1 (default 1): set_draw_weights.
  read_switch("FLASHDESK_CUDA_DRAW_WEIGHTS", draw_weights_);
  // FLASHDESK_CUDA_FUSE=0|1 (default 1): the fused ops as one kernel each (set_fused_ops); 0:
  // the Backend defaults' separate kernels (the benchmarks' A/B).
  read_switch("FLASHDESK_CUDA_FUSE", fuse_);
  // FLASHDESK_CUDA_FUSE_CACHE_ROWS=0|1 (default 1): rope_quantize_rows as one kernel at decode
  // sizes (set_fused_cache_rows; the benchmarks' A/B).
  read_switch("FLASHDESK_CUDA_FUSE_CACHE_ROWS", fuse_cache_rows_);
  // FLASHDESK_CUDA_BF16_STREAMS=0|1 (default 1): the residual streams stored as BF16
  // (stream_dtype); 0 keeps them F32 (the benchmarks' A/B).
  read_switch("FLASHDESK_CUDA_BF16_STREAMS", bf16_streams_);
  // FLASHDESK_CUDA_BOUNDARY_TWO_BLOCKS=0|1 (default 1): a prefill's sublayer boundaries in the
  // two-blocks-a-multiprocessor form of hc_collapse_norm_kernel (the benchmarks' A/B).
  read_switch("FLASHDESK_CUDA_BOUNDARY_TWO_BLOCKS", two_block_boundaries_);
  // FLASHDESK_CUDA_DOWN_SPLIT=4|2 (default 2): set_down_split (the benchmarks' A/B).
  if (const auto q = read_choice("FLASHDESK_CUDA_DOWN_SPLIT", {"4", "2"}))
    set_down_split(std::stoi(*q));
  // FLASHDESK_CUDA_DOWN_BLOCKS=8|10 (default 10): set_down_blocks (the benchmarks' A/B).
  if (const auto b = read_choice("FLASHDESK_CUDA_DOWN_BLOCKS", {"8", "10"}))
    set_down_blocks(std::stoi(*b));
  // FLASHDESK_CUDA_UNITS=ranges|interleaved (default interleaved): set_interleaved_units (the
  // A/B).
  if (const auto u = read_choice("FLASHDESK_CUDA_UNITS", {"ranges", "interleaved"}))
    set_interleaved_units(*u == "interleaved");
  // FLASHDESK_CUDA_FP8_CVT=0|1|all (default all): set_fp8_conversion (the A/B).
  if (const auto c = read_choice("FLASHDESK_CUDA_FP8_CVT", {"0", "1", "all"}))
    set_fp8_conversion(*c == "0"   ? Fp8Conversion::Off
                       : *c == "1" ? Fp8Conversion::OneRow
                                   : Fp8Conversion::All);
  // FLASHDESK_CUDA_WGMMA=1|128|0 (default 1): set_wgmma_experts Auto, Narrow or Off (the
  // benchmarks' A/B).
  if (const auto w = read_choice("FLASHDESK_CUDA_WGMMA", {"1", "128", "0"})) {
    const std::string& v = *w;
    set_wgmma_experts(v == "1"     ? WgmmaExperts::Auto
                      : v == "128" ? WgmmaExperts::Narrow
                                   : WgmmaExperts::Off);
  }
  // FLASHDESK_CUDA_WGMMA_FIT=0|1 (default 1): set_wgmma_fitted_products (the benchmarks' A/B).
  bool fitted = true;
  read_switch("FLASHDESK_CUDA_WGMMA_FIT", fitted);
  set_wgmma_fitted_products(fitted);
  if (const auto w = read_choice("FLASHDESK_CUDA_ATTENTION_WGMMA", {"auto", "1", "0"})) {
    const std::string& v = *w;
    attention_warpgroups_ = v == "1"   ? AttentionWarpgroups::On
                            : v == "0" ? AttentionWarpgroups::Off
                                       : AttentionWarpgroups::Auto;
  }
  // FLASHDESK_CUDA_ATTENTION=auto|whole|quarters|tensor-cores|split forces one attention path for
  // every call (A/B runs of summation orders: the head dim whole or in four parts, the tensor
  // cores a CTA per query, or split over the key list).
  if (const auto k = read_choice("FLASHDESK_CUDA_ATTENTION",
                                 {"auto", "whole", "quarters", "tensor-cores", "split"})) {
    const std::string& v = *k;
    attention_kernels_ = v == "whole"          ? AttentionKernels::CudaCoresWhole
                         : v == "quarters"     ? AttentionKernels::CudaCoresQuarters
                         : v == "tensor-cores" ? AttentionKernels::TensorCores
                         : v == "split"        ? AttentionKernels::TensorCoresSplit
                                               : AttentionKernels::Auto;
  }
}

CudaBackend::~CudaBackend() {
  // Pending work may still read tensors the caller has dropped; let it finish before the stream
  // and the pool's cache go away.
  if (ctx_ && ctx_->in_step()) ctx_->step_abort();
  if (ctx_) cudaStreamSynchronize(ctx_->main_stream());
}

void CudaBackend::set_gemv_kernels(GemvKernels k) {
  ctx_->set_gemv_kernels(k);
}

void CudaBackend::set_down_split(int warps) {
  FD_CHECK(warps == 4 || warps == 2,
           "down split: 4 or 2 warps a tile, not " + std::to_string(warps));
  ctx_->set_down_split(warps);
}

void CudaBackend::set_down_blocks(int blocks) {
  FD_CHECK(blocks == 8 || blocks == 10,
           "down blocks: 8 or 10 a multiprocessor, not " + std::to_string(blocks));
  ctx_->set_down_blocks(blocks);
}

void CudaBackend::set_interleaved_units(bool on) {
  ctx_->set_interleaved_units(on);
}

void CudaBackend::set_fp8_conversion(Fp8Conversion c) {
  ctx_->set_fp8_conversion(c);
}

void CudaBackend::set_wgmma_experts(WgmmaExperts w) {
  ctx_->set_wgmma_experts(w);
}

void CudaBackend::set_wgmma_fitted_products(bool on) {
  ctx_->set_wgmma_fitted_products(on);
}

bool CudaBackend::wgmma_experts_run() const {
  cuda::DeviceGuard g(ctx_->device());
  return ctx_->wgmma_experts() != WgmmaExperts::Off && cuda::grouped_wgmma_runs();
}

void CudaBackend::synchronize() {
  FD_CHECK(!ctx_->beside_open(), "synchronize inside a beside section");
  ++host_syncs_;
  cuda::DeviceGuard g(ctx_->device());
  ctx_->synchronize();
  end_timed_step();
}

void CudaBackend::read_graph_switches() {
  // FLASHDESK_CUDA_GRAPH=auto|0|1|capture (default auto): decode-sized steps as CUDA graphs
  // (step_graph.h) where the first steps' times say they are faster (auto), always (1, recorded
  // steps replayed; capture, every step captured) or never (0).
  if (const auto g = read_choice("FLASHDESK_CUDA_GRAPH", {"auto", "0", "1", "capture"})) {
    if (*g == "auto") {
      if (graph_mode_ != GraphMode::Auto) set_step_graphs_auto();  // a decided trial is kept
    } else {
      set_step_graphs(*g != "0");
    }
    set_step_replay(*g != "capture");
  }
  if (const auto n =
          read_choice("FLASHDESK_CUDA_GRAPH_PART_LAYERS", {"0", "1", "2", "4", "8", "16"}))
    part_layers_ = std::stoi(*n);
}

void CudaBackend::set_step_graphs_auto() {
  graph_mode_ = GraphMode::Auto;
  graph_choice_ = StepGraphChoice{};
}

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

void CudaBackend::step_graph_begin(int64_t rows) {
  bool graphs = graph_mode_ == GraphMode::On;
  if (graph_mode_ == GraphMode::Auto) {
    // A step whose result was not read (a rank that reads no logits) ends where the next begins.
    end_timed_step();
    graphs = graph_choice_.begin_step(rows) == StepGraphChoice::Way::Graphs;
    if (graph_choice_.timing()) timed_step_began_ = now_seconds();
  }
  if (!graphs) return;
  layers_in_part_ = 0;
  cuda::DeviceGuard g(ctx_->device());
  ctx_->step_begin();
}

void CudaBackend::step_graph_end() {
  timed_step_ended_ = timed_step_began_ >= 0;
  if (!ctx_->in_step()) return;
  cuda::DeviceGuard g(ctx_->device());
  ctx_->step_end();
}

// The auto trial's step ended (its result on the host, or the next step begun): its time.
void CudaBackend::end_timed_step() {
  if (!timed_step_ended_) return;
  graph_choice_.step_took(now_seconds() - timed_step_began_);
  timed_step_began_ = -1;
  timed_step_ended_ = false;
}

const cuda::StepGraphCounts& CudaBackend::step_graph_counts() const {
  return ctx_->graph_counts();
}

void CudaBackend::set_step_replay(bool on) {
  ctx_->set_step_replay(on);
}

void CudaBackend::relaunch_last_step() {
  cuda::DeviceGuard g(ctx_->device());
  ctx_->relaunch_last_step();
}

void CudaBackend::step_graph_layer_done() {
  if (!ctx_->in_step() || part_layers_ <= 0 || ++layers_in_part_ < part_layers_) return;
  layers_in_part_ = 0;
  cuda::DeviceGuard g(ctx_->device());
  ctx_->step_cut();
}

void CudaBackend::step_graph_abort() {
  timed_step_began_ = -1;  // not timed
  if (!ctx_->in_step()) return;
  cuda::DeviceGuard g(ctx_->device());
  ctx_->step_abort();
}

// Sections run on the context's beside lane (beside_lane.h): every op issues to the context's
// current stream.
void CudaBackend::beside_begin() {
  cuda::DeviceGuard g(ctx_->device());
  ctx_->beside_begin();
}

Backend::Beside CudaBackend::beside_end() {
  cuda::DeviceGuard g(ctx_->device());
  return Beside{ctx_->beside_end()};
}

void CudaBackend::join(Beside w) {
  if (w.id < 0) return;
  cuda::DeviceGuard g(ctx_->device());
  ctx_->join(w.id);
}

size_t CudaBackend::weight_bytes() const {
  return ctx_->weights().bytes_used();
}

Backend& CudaBackend::host_backend() {
  if (!host_) host_ = std::make_unique<CpuOptimizedBackend>(0);
  return *host_;
}

Tensor CudaBackend::alloc(DType dtype, Shape shape) {
  cuda::DeviceGuard g(ctx_->device());
  return ctx_->scratch(dtype, shape);
}

void CudaBackend::fill_zero(Tensor& t) {
  expect_device(t, "fill_zero");
  cuda::DeviceGuard g(ctx_->device());
  if (t.nbytes()) cuda::fill_async(t.bytes(), 0, t.nbytes(), ctx_->stream());
}

void CudaBackend::write(Tensor& dst, const void* src, size_t bytes) {
  expect_device(dst, "write");
  FD_CHECK(bytes == dst.nbytes(), "write: byte count mismatch");
  cuda::DeviceGuard g(ctx_->device());
  if (bytes)
    cuda::copy_async(dst.bytes(), ctx_->host_source(src, bytes), bytes, cudaMemcpyHostToDevice,
                     ctx_->stream());
}

void CudaBackend::read(const Tensor& src, void* dst, size_t bytes) {
  expect_device(src, "read");
  FD_CHECK(bytes == src.nbytes(), "read: byte count mismatch");
  FD_CHECK(!ctx_->beside_open(), "read inside a beside section");
  ++host_syncs_;
  cuda::trace_host_event("read (waits for the device)");
  cuda::DeviceGuard g(ctx_->device());
  ctx_->host_wait_begin();  // inside a step graph: launches what was captured so far
  if (bytes) cuda::copy_async(dst, src.bytes(), bytes, cudaMemcpyDeviceToHost, ctx_->stream());
  FD_CUDA_CHECK(cudaStreamSynchronize(ctx_->stream()));
  ctx_->host_wait_end();
  end_timed_step();  // a step's first read after its end: its result
}

void CudaBackend::copy(const Tensor& src, Tensor& dst) {
  expect_device(src, "copy");
  expect_device(dst, "copy");
  FD_CHECK(src.nbytes() == dst.nbytes(), "copy: byte count mismatch");
  cuda::DeviceGuard g(ctx_->device());
  if (src.nbytes())
    cuda::copy_async(dst.bytes(), src.bytes(), src.nbytes(), cudaMemcpyDeviceToDevice,
                     ctx_->stream());
}

void CudaBackend::gather_rows(const Tensor& src, std::span<const int64_t> rows, Tensor& dst) {
  const size_t rb = row_bytes(src);
  FD_CHECK(row_bytes(dst) == rb && dst.rows() == static_cast<int64_t>(rows.size()),
           "gather_rows: shape mismatch");
  std::vector<int64_t> to(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    FD_CHECK(rows[i] >= 0 && rows[i] < src.rows(), "gather_rows: row out of range");
    to[i] = static_cast<int64_t>(i);
  }
  cuda::DeviceGuard g(ctx_->device());
  copy_rows(src, rows, dst, to, rb);
}

void CudaBackend::scatter_rows(const Tensor& src, std::span<const int64_t> src_rows, Tensor& dst,
                               std::span<const int64_t> dst_rows) {
  const size_t rb = row_bytes(src);
  FD_CHECK(row_bytes(dst) == rb && src_rows.size() == dst_rows.size(),
           "scatter_rows: shape mismatch");
  for (size_t i = 0; i < src_rows.size(); ++i)
    FD_CHECK(src_rows[i] >= 0 && src_rows[i] < src.rows() && dst_rows[i] >= 0 &&
                 dst_rows[i] < dst.rows(),
             "scatter_rows: row out of range");
  cuda::DeviceGuard g(ctx_->device());
  copy_rows(src, src_rows, dst, dst_rows, rb);
}

// Inside a step graph the rows go to the device as values (row_copy.h), so that a step that
// writes other rows of the same tensors (a window ring's next slot) replays the recorded graph;
// elsewhere one device copy per run of consecutive rows.
void CudaBackend::copy_rows(const Tensor& src, std::span<const int64_t> src_rows, Tensor& dst,
                            std::span<const int64_t> dst_rows, size_t row_bytes) {
  if (ctx_->in_step())
    cuda::copy_rows_listed(*ctx_, src, src_rows, dst, dst_rows, row_bytes);
  else
    copy_row_runs(ctx_->stream(), src, src_rows, dst, dst_rows, row_bytes);
}

Tensor CudaBackend::upload(const TensorView& t) {
  FD_CHECK(t.nbytes == static_cast<size_t>(t.numel()) * dtype_size(t.dtype),
           std::string(t.name) + ": byte size does not match its shape");
  cuda::DeviceGuard g(ctx_->device());
  Tensor out(ctx_->weights().allocate(t.nbytes), 0, t.dtype, shape_of(t));
  if (t.nbytes)
    cuda::copy_async(out.bytes(), t.data, t.nbytes, cudaMemcpyHostToDevice, ctx_->stream());
  return out;
}

Tensor CudaBackend::upload_f32(const TensorView& t) {
  const int64_t n = t.numel();
  std::vector<float> wide(static_cast<size_t>(n));
  if (t.dtype == DType::F32) {
    FD_CHECK(t.nbytes == wide.size() * 4, std::string(t.name) + ": byte size mismatch");
    if (n) std::memcpy(wide.data(), t.data, t.nbytes);
  } else {
    FD_CHECK(t.dtype == DType::BF16, std::string(t.name) + ": expected BF16 or F32");
    FD_CHECK(t.nbytes == wide.size() * 2, std::string(t.name) + ": byte size mismatch");
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      wide[static_cast<size_t>(i)] = bf16_to_f32(h);
    }
  }
  cuda::DeviceGuard g(ctx_->device());
  Tensor out(ctx_->weights().allocate(wide.size() * 4), 0, DType::F32, shape_of(t));
  if (n)
    cuda::copy_async(out.bytes(), wide.data(), wide.size() * 4, cudaMemcpyHostToDevice,
                     ctx_->stream());
  return out;
}

}  // namespace flashdesk
