// The CUDA backend: every op of backend.h on one NVIDIA GPU, with the numerics of
// docs/numerics.md (tested op by op against cpu-reference in tests/cuda/).
//
// Goals: weights on the device in their stored formats (FP8 + UE8M0 tiles, packed FP4 + UE8M0,
// BF16; no BF16 copy of the model); batch-1 decode near the memory roofline (GEMV kernels that
// decode FP8/FP4 in registers, MoE experts of a token in one grouped launch, attention split over
// the KV then combined); prefill through cuBLAS BF16 GEMMs on dequantised tiles; all work on one
// stream of one device, so nothing here assumes the process has one GPU.
// Decode-sized steps run as CUDA graphs (step_graph.h), replayed without capture where a step's
// ops are the recorded ones. Non-goals (next steps, docs/cuda-backend.md): several GPUs.
// This header has no CUDA types: the op files (*.cu) reach the device through context().
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/ops/backend.h"
#include "engine/ops/cuda/cuda_devices.h"
#include "engine/ops/cuda/gemv_kernels.h"
#include "engine/ops/cuda/heap_steps.h"
#include "engine/ops/cuda/random_draw.h"
#include "engine/ops/cuda/step_graph_counts.h"
#include "engine/ops/cuda/wgmma_experts.h"
#include "engine/ops/step_graph_choice.h"

namespace flashdesk {
namespace cuda {
class DeviceContext;
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device = 0);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string_view name() const override { return name_; }
  DType stream_dtype() const override { return bf16_streams_ ? DType::BF16 : DType::F32; }
  const CudaDeviceInfo& device() const { return info_; }
  cuda::DeviceContext& context() { return *ctx_; }
  // Waits for every op issued so far (ops are asynchronous; read() waits by itself).
  void beside_begin() override;
  Beside beside_end() override;
  void join(Beside w) override;
  // Step graphs (step_graph.h): FLASHDESK_CUDA_GRAPH=auto (the default: the first one-row steps
  // timed as launches and as graphs, the faster kept; step_graph_choice.h), 1 (graphs), 0
  // (launches) or capture (every step captured, none replayed: set_step_replay(false)).
  void step_graph_begin(int64_t rows) override;
  void step_graph_end() override;
  void step_graph_abort() override;
  void step_graph_layer_done() override;
  void set_step_graphs(bool on) { graph_mode_ = on ? GraphMode::On : GraphMode::Off; }
  // Graphs or launches as the first steps' times decide (a new trial).
  void set_step_graphs_auto();
  // Layers a step graph's part holds (FLASHDESK_CUDA_GRAPH_PART_LAYERS, default 1): 0, the whole
  // step one graph (cut only by host reads); n, a part launched every n layers, so the device runs
  // a part while the host replays or captures the next, and a replay that stops captures the
  // rest of its part only.
  void set_step_graph_part_layers(int n) { part_layers_ = n; }
  // Reads FLASHDESK_CUDA_GRAPH and FLASHDESK_CUDA_GRAPH_PART_LAYERS again (benchmarks' A/B).
  void read_graph_switches();
  // The auto mode's trial (nullptr in the other modes).
  const StepGraphChoice* step_graph_choice() const {
    return graph_mode_ == GraphMode::Auto ? &graph_choice_ : nullptr;
  }
  void set_step_replay(bool on);
  const cuda::StepGraphCounts& step_graph_counts() const;
  // Launches the last step's graph again without capturing it (benchmarks: what a step costs the
  // device without the host's capture; the last step must have had no host wait inside).
  void relaunch_last_step();
  void synchronize();
  // moe_experts calls whose routed experts were in host memory and ran on the CPU.
  uint64_t host_moe_calls() const { return host_moe_calls_; }
  // Times the host waited for the stream so far (read() and synchronize(), the ops' own read-backs
  // included): what a small model on the GPU pays for most (docs/dspark.md "On the GPU").
  uint64_t host_syncs() const { return host_syncs_; }
  // Which sparse attention kernels run: picked per call (Auto: the tensor-core kernels split over
  // the key list for decode-sized calls, the tensor-core kernel of a CTA per query for
  // prefill-sized ones, where their shapes allow; else the CUDA-core kernels, the head dim in 4
  // parts or undivided), or forced (the tests run each).
  enum class AttentionKernels {
    Auto,
    CudaCoresWhole,
    CudaCoresQuarters,
    TensorCores,
    TensorCoresSplit
  };
  void set_attention_kernels(AttentionKernels k) { attention_kernels_ = k; }
  // Whether the tensor-core path of a CTA per query runs on Hopper's warpgroup products where the
  // device has them (attention_wgmma_sm90a.cu) or on mma.sync (attention_tc.cu): always, never,
  // or (Auto, the default) for key lists of up to two 64-slot blocks, the window-only layers',
  // where it measured faster (longer lists measured slower: docs/cuda-backend.md).
  // FLASHDESK_CUDA_ATTENTION_WGMMA=auto|1|0; the tests force each.
  enum class AttentionWarpgroups { Off, Auto, On };
  void set_attention_warpgroups(AttentionWarpgroups w) { attention_warpgroups_ = w; }
  // Calls whose attention ran on the warpgroup kernel so far (the tests: a Hopper GPU must run it
  // where it is asked for; a build without the sm_90a object would fall back silently).
  uint64_t attention_warpgroup_calls() const { return attention_warpgroup_calls_; }
  // The indexer's tie selection in shared memory where the row fits (default), or always in
  // global memory (the tests run both).
  void set_select_in_shared_memory(bool on) { select_in_shared_memory_ = on; }
  bool select_in_shared_memory() const { return select_in_shared_memory_; }
  // Whether torch's selection partitions a range over threads that each keep a run of it as bit
  // masks, on fewer threads as the ranges shrink (torch_select_block.cuh's partition_runs), or
  // on the whole block with warp-striped stop lists (the default until measured on a GPU;
  // FLASHDESK_CUDA_SELECT_RUNS=0|1; the tests run both).
  void set_select_runs(bool on) { select_runs_ = on; }
  bool select_runs() const { return select_runs_; }
  // With the whole block's partitions: ranges of at most 512 elements partitioned by the first
  // warp alone, without the block's barriers (FLASHDESK_CUDA_SELECT_WARP_TAIL=0|1, on by default
  // since the thirty-ninth session: the selection alone 0.6-7.7% faster on every layer row of an
  // H200 call; the tests run both).
  void set_select_warp_tail(bool on) { select_warp_tail_ = on; }
  bool select_warp_tail() const { return select_warp_tail_; }
  // With the whole block's partitions: each warp's count pass keeps its stop masks in registers
  // for the write pass instead of loading and comparing the range again
  // (FLASHDESK_CUDA_SELECT_STOP_MASKS=0|1, on by default since the fortieth session: the selection
  // alone 2.3-5.8% faster on every layer row of an H100 call; the tests run both).
  void set_select_stop_masks(bool on) { select_stop_masks_ = on; }
  bool select_stop_masks() const { return select_stop_masks_; }
  // Who takes the heap select's steps (torch's partial_sort when 64 k <= the row: a decode row
  // from 32,768 entries), on which copy of the heap (cuda::HeapSteps): one thread on a copy in
  // shared memory (thread_heap_steps, its sift loading a level ahead; the default: 1.26-1.32x the
  // selection at 64K-1M entries on an H100, the warp's 1.22-1.25x, twenty-ninth session), a warp
  // on that copy (warp_pop_to), or one thread with the heap in place
  // (FLASHDESK_CUDA_HEAP_STEPS=thread|warp|in-place; the tests run all three).
  using HeapSteps = cuda::HeapSteps;
  void set_heap_steps(HeapSteps steps) { heap_steps_ = steps; }
  HeapSteps heap_steps() const { return heap_steps_; }
  // Whether a row too wide for the shared-memory selection (a decode row from about 18,000
  // entries) selects its top-k and its candidate blocks on two blocks at once (the default: a
  // Full layer's selection 1.65x at 1M entries, 1.04-1.71x at 32K-256K on an H100) or one after
  // the other on one: on long rows each is a serial heap select (FLASHDESK_CUDA_SELECT_SPLIT=0|1;
  // the tests run both).
  void set_select_split(bool on) { select_split_ = on; }
  bool select_split() const { return select_split_; }
  // From how many entries a row's indexer scores (CUDA-core kernel) take two entries a lane group,
  // each q load from shared memory feeding both, instead of one: halving the blocks is no loss
  // only where they are many (default 262,144: a 1M-context layer's scores 0.3-0.4 ms faster on
  // an H100; FLASHDESK_CUDA_SCORE_PAIRS_FROM=N; the tests run both forms).
  void set_score_pairs_from(int64_t entries) { score_pairs_from_ = entries; }
  int64_t score_pairs_from() const { return score_pairs_from_; }
  // Threads a selecting block has in prefill-sized calls (at least 64 query rows): a decode
  // step's few rows keep 1024 (their latency is the step's), while a prompt's thousands of rows
  // ran one 1024-thread block a multiprocessor (64 registers a thread: the whole register file),
  // mostly waiting at barriers. Fewer threads a row put more rows on each multiprocessor; a row
  // that 1024 threads would hold in registers is given enough threads to hold it. Default 128
  // (an 8K-token prompt's selection 1.6-2.5x, a Full layer's prefill 0.8-1.3 ms faster on an
  // H100; FLASHDESK_CUDA_SELECT_THREADS=64|128|256|512|1024; the tests run several).
  void set_prefill_select_threads(int threads);
  int prefill_select_threads() const { return prefill_select_threads_; }
  // Which kernel scores the indexer's rows: by row count (Auto: the tensor cores for
  // prefill-sized calls where the shape fits, indexer_tc.cu), the tensor cores wherever the shape
  // fits, or the CUDA cores (FLASHDESK_CUDA_INDEXER=auto|tensor-cores|cuda-cores; the tests
  // compare the two to the bit).
  enum class IndexerKernels { Auto, TensorCores, CudaCores };
  void set_indexer_kernels(IndexerKernels k) { indexer_kernels_ = k; }
  // Whether the tensor-core scores decode the call's FP4 keys once, into BF16 rows that each CTA
  // copies a tile ahead (cp.async; the default: an 8K prompt's scores 1.24-1.27x, its Full and
  // Reindex layers 0.2-0.9 ms faster on an H100), or each CTA decodes its own tiles (about a
  // thousand times an entry in an 8K-token prefill) between its products; the same scores to the
  // bit (FLASHDESK_CUDA_INDEX_KEYS=decoded|per-tile; the tests run both).
  void set_index_keys_decoded(bool on) { index_keys_decoded_ = on; }
  bool index_keys_decoded() const { return index_keys_decoded_; }
  // The rows indexer_select selects from, [n, max(entries, select_width)] F32 (for the tests).
  Tensor indexer_scores(const IndexerArgs& args);
  // indexer_select's selection over given score rows [n, width] (each row's first n_visible[t]
  // entries visible, candidate blocks of block_size): the benchmarks time it on rows a layer
  // made (cuda_select_bench --rows), apart from the scores.
  void indexer_select_rows(const Tensor& scores, std::span<const int64_t> n_visible,
                           int64_t block_size, Tensor& topk, Tensor* candidates);
  // The decode experts' FP8 shared slot in byte-balanced parts (FLASHDESK_CUDA_MOE_PARTS=1).
  void set_balance_shared_expert(bool on) { balance_shared_expert_ = on; }
  // The decode experts' shared slot split over K on the tensor cores (moe_decode_tc.cu).
  void set_split_shared_expert_tc(bool on) { split_shared_tc_ = on; }
  // Whether the decode experts (up to 8 rows) run on the tensor cores where their formats and
  // shapes allow (moe_decode_tc.cuh; the default) or on the CUDA cores (the tests compare the
  // two; FLASHDESK_CUDA_MOE_DECODE=cuda-cores).
  void set_decode_experts_tensor_cores(bool on) { decode_experts_tc_ = on; }
  // How many warps split a tile's K units in the tensor-core decode experts' down kernel: 2 (the
  // default: blocks of 128 threads) or 4 (256, as the up kernel; FLASHDESK_CUDA_DOWN_SPLIT; the
  // tests run both).
  void set_down_split(int warps);
  // Blocks a multiprocessor of that down kernel at one row, two warps a tile: 10 (the default:
  // 48 registers a thread, rings 3 deep, a V4.1 step's blocks in one wave) or 8 (rings 4 deep;
  // FLASHDESK_CUDA_DOWN_BLOCKS; the tests run both).
  void set_down_blocks(int blocks);
  // Whether the tensor-core decode kernels (experts, dense FP8 linears of a few rows) hand each
  // tile's K units to its warps interleaved, so that they read neighbouring bytes of a row at a
  // time (the default), or as contiguous ranges (FLASHDESK_CUDA_UNITS=interleaved|ranges; the
  // tests run both).
  void set_interleaved_units(bool on);
  // Where the FP8 GEMV of up to 8 rows on the CUDA cores decodes its codes by the hardware's E4M3
  // conversion (sm_89 on; the same values) rather than by shifts and masks: nowhere, at one
  // act_quant'ed row, or everywhere (the default, as measured; FLASHDESK_CUDA_FP8_CVT=0|1|all;
  // the tests run all three).
  using Fp8Conversion = cuda::Fp8Conversion;
  void set_fp8_conversion(Fp8Conversion c);
  // Whether dense FP8 linears of up to 8 rows run on the tensor cores where they fit
  // (gemv_tc.cuh), on the CUDA-core GEMV, or by row count (the default: the tensor cores from a
  // few rows on). The tests run both kernels; FLASHDESK_CUDA_GEMV=auto|tc|cuda-cores.
  using GemvKernels = cuda::GemvKernels;
  void set_gemv_kernels(GemvKernels k);
  // Whether prefill-sized MoE steps run the routed experts on the tensor cores (moe_grouped.h;
  // the default) or as one dequantised cuBLAS product per expert (tests compare the two).
  void set_grouped_moe(bool on) { grouped_moe_ = on; }
  // Whether those tensor-core experts run Hopper's wgmma kernels where the device and this binary
  // have them, in CTAs of 256 weight rows where the shapes allow (Auto, the default) or of 128
  // (Narrow), or the mma.sync kernels every GPU runs (Off). FLASHDESK_CUDA_WGMMA=1|128|0; the
  // tests run all three.
  using WgmmaExperts = cuda::WgmmaExperts;
  void set_wgmma_experts(WgmmaExperts w);
  // Whether the wgmma kernels' products cover a tile's pairs rounded up to 32 (the default) or
  // all 128 rows of the tile. FLASHDESK_CUDA_WGMMA_FIT=1|0.
  void set_wgmma_fitted_products(bool on);
  // Whether prefill experts run those wgmma kernels now (the switch not Off, a Hopper GPU, and a
  // binary with their sm_90a code).
  bool wgmma_experts_run() const;
  // Whether the fused ops (hc_collapse_norm, hc_expand_collapse_norm, moe_experts_rounded,
  // sparse_attention_unrotated) run as one kernel each (the default) or as the Backend
  // defaults' separate kernels (FLASHDESK_CUDA_FUSE; the tests compare the two).
  void set_fused_ops(bool on) { fuse_ = on; }
  // Device bytes held by weights (upload*) so far.
  size_t weight_bytes() const;

  Tensor alloc(DType dtype, Shape shape) override;
  void fill_zero(Tensor& t) override;
  void write(Tensor& dst, const void* src, size_t bytes) override;
  void read(const Tensor& src, void* dst, size_t bytes) override;
  void copy(const Tensor& src, Tensor& dst) override;
  void gather_rows(const Tensor& src, std::span<const int64_t> rows, Tensor& dst) override;
  void scatter_rows(const Tensor& src, std::span<const int64_t> src_rows, Tensor& dst,
                    std::span<const int64_t> dst_rows) override;
  Tensor upload(const TensorView& t) override;
  // Engram tables stay in host memory (the mapped checkpoint): engram_gather reads their rows
  // there and uploads the few it needs (issue 18: 189 GiB of V4.1-Flash fit no GPU).
  Tensor upload_table(const TensorView& t) override { return mapped_host_tensor(t); }
  Tensor upload_f32(const TensorView& t) override;
  // A synthetic checkpoint's linear drawn on the GPU (random_draw.h) unless the switch is off
  // (FLASHDESK_CUDA_DRAW_WEIGHTS=0; on by default since it gave the host's bytes on an H100 and
  // drew FP4 experts 49x faster than 16 host threads and an upload): the units the kernel flags
  // are generated on the host and copied over it.
  LinearWeight draw_linear(const RandomWeightRecipe& recipe, int64_t first_row,
                           int64_t rows) override;
  // An Engram table drawn on the GPU in chunks (kDrawTableChunkBytes of codes each) and copied
  // to the host buffers; the flagged rows generated there.
  bool draw_into_host(const RandomWeightRecipe& recipe, uint8_t* weight, uint8_t* scale) override;
  void set_draw_weights(bool on) { draw_weights_ = on; }
  // The flagging margin as a power of two (random_draw.h's kDrawMarginLog2; the tests widen it).
  void set_draw_margin_log2(int e) { draw_margin_log2_ = e; }
  // Rows a table chunk holds (0: kDrawTableChunkBytes of codes; the tests take a few).
  void set_draw_table_chunk_rows(int64_t rows) { draw_table_chunk_rows_ = rows; }
  static constexpr int64_t kDrawTableChunkBytes = int64_t{256} << 20;
  struct DrawStats {
    uint64_t draws = 0;       // kernels drawing a linear or a table's chunk
    uint64_t units = 0;       // their rows (FP8 tiles: 32-row groups)
    uint64_t host_units = 0;  // of which the host generated
  };
  const DrawStats& draw_stats() const { return draw_stats_; }

  void linear(const Tensor& x, const LinearWeight& w, LinearMode mode, Tensor& y) override;
  void grouped_linear(const Tensor& x, const LinearWeight& w, int64_t groups, Tensor& y) override;
  void rms_norm(const Tensor& x, const Tensor* weight, float eps, Tensor& y) override;
  void rope(Tensor& x, int64_t head_dim, std::span<const int64_t> positions,
            std::span<const float> inv_freq, bool inverse) override;
  void scale(Tensor& x, float factor) override;
  void round_bf16(Tensor& x) override;
  void fake_quant_fp4_e8m0(Tensor& x, int64_t block) override;

  void embed_rows(const Tensor& table, const Tensor& ids, Tensor& rows) override;
  void add_argmax(Tensor& x, const Tensor& bias, Tensor& ids) override;
  void concat_columns(const Tensor& left, const Tensor& right, Tensor& out) override;

  void embed(const Tensor& table, std::span<const int32_t> ids, Tensor& rows, Tensor& X) override;
  void hc_mixes(const Tensor& X, const HcParams& p, const HcSettings& s, Tensor& pre, Tensor& post,
                Tensor& comb) override;

  void hc_collapse(const Tensor& X, const Tensor& pre, Tensor& u) override;
  void hc_collapse_norm(const Tensor& X, const Tensor& pre, const Tensor& norm, float eps,
                        Tensor& u) override;
  void hc_expand_collapse_norm(const Tensor& X, const Tensor& y, const Tensor& post,
                               const Tensor& comb, const Tensor& pre, const Tensor& norm, float eps,
                               Tensor& out, Tensor& u) override;
  void hc_expand(const Tensor& X, const Tensor& y, const Tensor& post, const Tensor& comb,
                 Tensor& out) override;

  // One kernel at decode sizes where set_fused_cache_rows is on (the default:
  // FLASHDESK_CUDA_FUSE_CACHE_ROWS=0 turns it off; measured level to 11 µs off a decode layer, 2-5
  // kernels fewer, thirty-eighth session), else the three ops.
  void rope_quantize_rows(Tensor& x, const Tensor* norm, float eps,
                          std::span<const int64_t> positions, std::span<const float> inv_freq,
                          KvFormat format, Tensor& dst, int64_t first_row) override;
  void set_fused_cache_rows(bool on) { fuse_cache_rows_ = on; }
  bool fused_cache_rows() const { return fuse_cache_rows_; }
  void quantize_rows(KvFormat format, const Tensor& x, Tensor& dst, int64_t first_row) override;
  void dequantize_rows(KvFormat format, const Tensor& src, int64_t first_row, Tensor& out) override;
  void compressor_pool(const Tensor& kv, const Tensor& score, int64_t ratio, Tensor& pending_kv,
                       Tensor& pending_score, int64_t& n_pending, Tensor& out) override;

  void indexer_select(const IndexerArgs& args, Tensor& topk, Tensor* candidates) override;
  void sparse_attention(const AttentionArgs& args, Tensor& out) override;
  void sparse_attention_unrotated(const AttentionArgs& args, std::span<const float> inv_freq,
                                  Tensor& out) override;

  void moe_route(const Tensor& logits, const Tensor& bias, const Tensor* bias_image,
                 std::span<const uint8_t> image_rows, const RouteSettings& s, Tensor& ids,
                 Tensor& weights) override;
  void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights,
                   std::span<const ExpertWeights* const> experts, const ExpertWeights* shared,
                   float swiglu_limit, Tensor& y) override;
  void moe_experts_rounded(const Tensor& x, const Tensor& ids, const Tensor& weights,
                           std::span<const ExpertWeights* const> experts,
                           const ExpertWeights* shared, float swiglu_limit, Tensor& y) override;
  bool shared_expert_beside_router(const ExpertWeights& shared, int64_t rows) const override;
  void moe_shared_expert(const Tensor& x, const ExpertWeights& shared, float swiglu_limit,
                         Tensor& y) override;
  void moe_routed_experts_plus(const Tensor& x, const Tensor& ids, const Tensor& weights,
                               std::span<const ExpertWeights* const> experts,
                               const Tensor& shared_y, float swiglu_limit, Tensor& y) override;
  // The compressor and the indexer beside the query's projections at decode sizes
  // (Backend::indexer_beside_query; FLASHDESK_CUDA_INDEXER_BESIDE=1; off by default until
  // measured on a GPU).
  bool indexer_beside_query(int64_t rows) const override;
  void set_indexer_beside_query(bool on) { indexer_beside_ = on; }
  // The shared expert beside the router at decode sizes (FLASHDESK_CUDA_SHARED_AHEAD=1; off by
  // default: measured slower, docs/cuda-backend.md).
  void set_shared_expert_ahead(bool on) { shared_ahead_ = on; }

  void engram_gather(const QuantTable& table, std::span<const int64_t> ids, Tensor& e) override;
  void engram_update(Tensor& X, const Tensor& kv, const Tensor& q_weight, const Tensor& k_weight,
                     std::span<const uint8_t> masked_rows, float eps) override;

 private:
  // sparse_attention, with RoPE undone on out where unrotate_freq is not empty.
  void attend(const AttentionArgs& args, std::span<const float> unrotate_freq, Tensor& out);
  // gather_rows / scatter_rows: dst row dst_rows[i] = src row src_rows[i].
  void copy_rows(const Tensor& src, std::span<const int64_t> src_rows, Tensor& dst,
                 std::span<const int64_t> dst_rows, size_t row_bytes);
  // moe_experts, or with shared null and shared_y set the routed sum plus that term last; round:
  // the sums rounded to BF16 (moe_experts_rounded).
  void moe_experts_with(const Tensor& x, const Tensor& ids, const Tensor& weights,
                        std::span<const ExpertWeights* const> experts, const ExpertWeights* shared,
                        const Tensor* shared_y, float swiglu_limit, Tensor& y, bool round = false);
  // Routed experts left in host memory (upload_linear in_host): computed by the CPU backend
  // below, the shared expert's term on the device (or shared_y, computed ahead), y = their sum
  // in the definition's order.
  void moe_experts_on_host(const Tensor& x, const Tensor& ids, const Tensor& weights,
                           std::span<const ExpertWeights* const> experts,
                           const ExpertWeights* shared, const Tensor* shared_y, float swiglu_limit,
                           Tensor& y);
  // The draw of `recipe`'s rows in the device's terms (first_row and rows: the whole weight).
  cuda::RandomDraw draw_of(const RandomWeightRecipe& recipe) const;
  // Draws `d` to device memory and returns its units' flags (one byte each; waits for them).
  std::vector<uint8_t> draw_flagged(const cuda::RandomDraw& d, uint8_t* weight, uint8_t* scale);
  // The CPU backend (all cores, made on first use) that runs what stays in host memory: routed
  // experts of hybrid layers, Engram table rows.
  Backend& host_backend();
  uint64_t host_moe_calls_ = 0;
  uint64_t host_syncs_ = 0;
  enum class GraphMode { Off, On, Auto };
  GraphMode graph_mode_ = GraphMode::Auto;
  StepGraphChoice graph_choice_;
  // Auto: the step being timed began at this host time (steady clock, seconds; < 0: none) and
  // has ended (its last ops issued): its first read then gives its time to the trial.
  double timed_step_began_ = -1;
  bool timed_step_ended_ = false;
  void end_timed_step();
  int part_layers_ = 1, layers_in_part_ = 0;
  AttentionKernels attention_kernels_ = AttentionKernels::Auto;
  bool select_in_shared_memory_ = true;
  bool select_runs_ = false;                  // FLASHDESK_CUDA_SELECT_RUNS
  bool select_warp_tail_ = true;              // FLASHDESK_CUDA_SELECT_WARP_TAIL
  bool select_stop_masks_ = true;             // FLASHDESK_CUDA_SELECT_STOP_MASKS
  bool indexer_beside_ = false;               // FLASHDESK_CUDA_INDEXER_BESIDE
  HeapSteps heap_steps_ = HeapSteps::Thread;  // FLASHDESK_CUDA_HEAP_STEPS
  int64_t score_pairs_from_ = 262144;         // FLASHDESK_CUDA_SCORE_PAIRS_FROM
  bool select_split_ = true;                  // FLASHDESK_CUDA_SELECT_SPLIT
  int prefill_select_threads_ = 128;          // FLASHDESK_CUDA_SELECT_THREADS
  IndexerKernels indexer_kernels_ = IndexerKernels::Auto;
  bool index_keys_decoded_ = true;  // FLASHDESK_CUDA_INDEX_KEYS
  // FLASHDESK_CUDA_MOE_PARTS=1: the decode experts' shared slot in byte-balanced parts (opt-in
  // until measured on a GPU in its full-wave form).
  bool balance_shared_expert_ = false;
  bool split_shared_tc_ = true;       // FLASHDESK_CUDA_MOE_SPLIT
  bool shared_ahead_ = false;         // FLASHDESK_CUDA_SHARED_AHEAD
  bool fuse_ = true;                  // FLASHDESK_CUDA_FUSE
  bool fuse_cache_rows_ = true;       // FLASHDESK_CUDA_FUSE_CACHE_ROWS
  bool bf16_streams_ = true;          // FLASHDESK_CUDA_BF16_STREAMS
  bool two_block_boundaries_ = true;  // FLASHDESK_CUDA_BOUNDARY_TWO_BLOCKS
  bool grouped_moe_ = true;
  bool decode_experts_tc_ = true;
  bool attention_tensor_cores_ = true;  // Auto's choice of the tensor-core kernels
  AttentionWarpgroups attention_warpgroups_ = AttentionWarpgroups::Auto;
  bool draw_weights_ = true;  // FLASHDESK_CUDA_DRAW_WEIGHTS
  int draw_margin_log2_ = cuda::kDrawMarginLog2;
  int64_t draw_table_chunk_rows_ = 0;
  DrawStats draw_stats_;
  uint64_t attention_warpgroup_calls_ = 0;

  CudaDeviceInfo info_;
  std::string name_;
  std::unique_ptr<cuda::DeviceContext> ctx_;
  std::unique_ptr<Backend> host_;
};

}  // namespace flashdesk
