// Sparse attention on the CUDA backend against a scalar host model of docs/numerics.md's
// definition (per query and head, an online softmax over consecutive blocks of 64 list slots —
// the W window slots, then the top-k columns — with BF16-rounded p in the value sum and the sink
// added to the denominator at the end): within 2 BF16 ulps at the larger of the value and 1/8 of
// the output's RMS (a score one FP32 ulp apart can move a BF16 p by one of its ulps); with its
// RoPE undone in the same op (sparse_attention_unrotated), the bits of the two ops.
#include "engine/ops/cpu/kernels.h"
#include "tests/cuda/cuda_test_util.h"

namespace flashdesk::test {
namespace {

struct AttnCase {
  int64_t heads, dim, window;
  std::vector<int64_t> positions;  // queries
  std::vector<int64_t> ring_positions;
  int64_t step_first;
  int64_t n_step;
  int64_t n_entries, kc;  // kc = 0: window-only
  uint32_t seed;
};

std::vector<uint8_t> quantized_rows(KvFormat f, int64_t rows, int64_t dim, uint32_t seed) {
  const std::vector<float> v = random_bf16(static_cast<size_t>(rows * dim), seed, 1.0f);
  std::vector<uint8_t> out(static_cast<size_t>(rows * kv_row_bytes(f, dim)));
  for (int64_t r = 0; r < rows; ++r)
    cpu::quantize_kv_row(f, &v[static_cast<size_t>(r * dim)], dim,
                         &out[static_cast<size_t>(r * kv_row_bytes(f, dim))]);
  return out;
}

// The definition, scalar, in FP32.
std::vector<float> reference(const AttnCase& c, const std::vector<float>& q,
                             const std::vector<uint8_t>& ring, const std::vector<uint8_t>& step,
                             const std::vector<uint8_t>& entries, const std::vector<int32_t>& topk,
                             const std::vector<float>& sink, float scale) {
  const int64_t n = int64_t(c.positions.size()), D = c.dim, W = c.window;
  const int64_t wb = kv_row_bytes(KvFormat::Fp8Window, D), eb = kv_row_bytes(KvFormat::Fp4Entry, D);
  std::vector<float> out(static_cast<size_t>(n * c.heads * D), 0.0f);
  for (int64_t t = 0; t < n; ++t) {
    const int64_t p = c.positions[static_cast<size_t>(t)];
    std::vector<std::vector<float>> keys(static_cast<size_t>(W + c.kc));
    std::vector<bool> valid(keys.size(), false);
    for (int64_t i = 0; i < W; ++i) {
      const int64_t pos = std::max<int64_t>(0, p - W + 1) + i;
      const uint8_t* row = nullptr;
      if (pos > p) continue;
      if (pos >= c.step_first)
        row = &step[static_cast<size_t>((pos - c.step_first) * wb)];
      else if (c.ring_positions[static_cast<size_t>(pos % W)] == pos)
        row = &ring[static_cast<size_t>((pos % W) * wb)];
      if (!row) continue;
      keys[static_cast<size_t>(i)].resize(static_cast<size_t>(D));
      cpu::dequantize_kv_row(KvFormat::Fp8Window, row, D, keys[static_cast<size_t>(i)].data());
      valid[static_cast<size_t>(i)] = true;
    }
    for (int64_t j = 0; j < c.kc; ++j) {
      const int32_t id = topk[static_cast<size_t>(t * c.kc + j)];
      if (id < 0) continue;
      keys[static_cast<size_t>(W + j)].resize(static_cast<size_t>(D));
      cpu::dequantize_kv_row(KvFormat::Fp4Entry, &entries[static_cast<size_t>(id * eb)], D,
                             keys[static_cast<size_t>(W + j)].data());
      valid[static_cast<size_t>(W + j)] = true;
    }
    const bool any = std::find(valid.begin(), valid.end(), true) != valid.end();
    for (int64_t h = 0; h < c.heads; ++h) {
      const float* qh = &q[static_cast<size_t>((t * c.heads + h) * D)];
      float m = -1e30f, denom = 0.0f;
      std::vector<float> acc(static_cast<size_t>(D), 0.0f);
      for (size_t b0 = 0; b0 < keys.size(); b0 += 64) {
        const size_t b1 = std::min(keys.size(), b0 + 64);
        std::vector<float> s(b1 - b0, -INFINITY);
        float mb = -INFINITY;
        for (size_t i = b0; i < b1; ++i) {
          if (!valid[i]) continue;
          float dot = 0.0f;
          for (int64_t d = 0; d < D; ++d) dot += qh[d] * keys[i][static_cast<size_t>(d)];
          s[i - b0] = dot * scale;
          mb = std::max(mb, s[i - b0]);
        }
        const float m_new = std::max(m, mb), cf = std::exp(m - m_new);
        float psum = 0.0f;
        for (float& a : acc) a *= cf;
        for (size_t i = b0; i < b1; ++i) {
          const float pi = std::exp(s[i - b0] - m_new);
          psum += pi;
          if (!valid[i]) continue;
          const float pb = round_bf16(pi);
          for (int64_t d = 0; d < D; ++d)
            acc[static_cast<size_t>(d)] += pb * keys[i][static_cast<size_t>(d)];
        }
        denom = denom * cf + psum;
        m = m_new;
      }
      denom += std::exp(sink[static_cast<size_t>(h)] - m);
      for (int64_t d = 0; d < D; ++d)
        out[static_cast<size_t>((t * c.heads + h) * D + d)] =
            any ? round_bf16(acc[static_cast<size_t>(d)] / denom) : 0.0f;
    }
  }
  return out;
}

class CudaAttentionTest : public CudaOpTest {
 protected:
  void check(const AttnCase& c) {
    const int64_t n = int64_t(c.positions.size()), D = c.dim, H = c.heads, W = c.window;
    const std::vector<float> q = random_bf16(static_cast<size_t>(n * H * D), c.seed, 1.0f);
    const std::vector<uint8_t> ring = quantized_rows(KvFormat::Fp8Window, W, D, c.seed + 1);
    const std::vector<uint8_t> step =
        quantized_rows(KvFormat::Fp8Window, std::max<int64_t>(c.n_step, 1), D, c.seed + 2);
    const int64_t cap = std::max<int64_t>(c.n_entries, 1) + 3;
    const std::vector<uint8_t> entries = quantized_rows(KvFormat::Fp4Entry, cap, D, c.seed + 3);
    std::mt19937 rng(c.seed + 4);
    std::vector<int32_t> topk(static_cast<size_t>(n * c.kc));
    for (auto& id : topk)
      id = rng() % 7 == 0
               ? -1
               : static_cast<int32_t>(rng() % uint32_t(std::max<int64_t>(c.n_entries, 1)));
    const std::vector<float> sink = random_uniform(static_cast<size_t>(H), c.seed + 5, -1.0f, 3.0f);
    const float scale = 1.0f / std::sqrt(float(D));

    Pair qt = both_f32(Shape{n, H, D}, q);
    Pair ring_t = both(DType::U8, Shape{W, kv_row_bytes(KvFormat::Fp8Window, D)}, ring);
    Pair step_t =
        both(DType::U8, Shape{std::max<int64_t>(c.n_step, 1), kv_row_bytes(KvFormat::Fp8Window, D)},
             step);
    Pair ent_t = both(DType::U8, Shape{cap, kv_row_bytes(KvFormat::Fp4Entry, D)}, entries);
    Pair topk_t = both(DType::I32, Shape{n, std::max<int64_t>(c.kc, 1)},
                       c.kc ? topk : std::vector<int32_t>(static_cast<size_t>(n), -1));
    Pair sink_t = both_f32(Shape{H}, sink);
    Tensor out = gpu_poisoned(DType::F32, Shape{n, H, D});
    const Tensor step_rows = step_t.gpu.rows(0, c.n_step);
    AttentionArgs a;
    a.q = &qt.gpu;
    a.positions = c.positions;
    a.window = WindowKv{&ring_t.gpu, c.ring_positions, &step_rows, c.step_first, W};
    if (c.kc) {
      a.compressed = EntryCache{&ent_t.gpu, c.n_entries};
      a.topk = &topk_t.gpu;
    }
    a.sink = &sink_t.gpu;
    a.softmax_scale = scale;
    const std::vector<float> want = reference(c, q, ring, step, entries, topk, sink, scale);
    std::vector<float> freq(static_cast<size_t>(std::min<int64_t>(32, D / 4)));
    for (size_t i = 0; i < freq.size(); ++i)
      freq[i] =
          std::pow(10000.0f, -2.0f * static_cast<float>(i) / static_cast<float>(freq.size() * 2));
    // The CUDA-core kernels with the head dim undivided and in 4 parts (decode's), the
    // tensor-core kernel of a CTA per query (prefill's; shapes it does not take fall back to the
    // undivided ones) on Hopper's warpgroup products where the device (or the emulation) has them
    // and the shape fits and on mma.sync, the split one, then as picked.
    using K = CudaBackend::AttentionKernels;
    using WG = CudaBackend::AttentionWarpgroups;
    struct Kernels {
      K k;
      WG warpgroups;
      const char* name;
    };
    const Kernels kernels[] = {{K::CudaCoresWhole, WG::Auto, "cuda-cores whole"},
                               {K::CudaCoresQuarters, WG::Auto, "cuda-cores quarters"},
                               {K::TensorCores, WG::On, "tensor cores (warpgroups)"},
                               {K::TensorCores, WG::Off, "tensor cores (mma.sync)"},
                               {K::TensorCoresSplit, WG::Auto, "tensor cores split"},
                               {K::Auto, WG::Auto, "auto"}};
    const CudaDeviceInfo& device = cuda_devices().front();
    const bool hopper = device.major == 9 && device.minor == 0;
    for (const auto& [k, warpgroups, name] : kernels) {
      gpu().set_attention_kernels(k);
      gpu().set_attention_warpgroups(warpgroups);
      const uint64_t warpgroup_calls = gpu().attention_warpgroup_calls();
      gpu().sparse_attention(a, out);
      // A Hopper GPU (or the emulation) runs the warpgroup kernel where it is asked for and takes
      // the shape (head dim 128, 256 or 512), and no forced other path does (Auto picks by size).
      const bool takes =
          k == K::TensorCores && warpgroups == WG::On && (D == 128 || D == 256 || D == 512);
      if (k != K::Auto) {
        EXPECT_EQ(gpu().attention_warpgroup_calls() - warpgroup_calls,
                  takes && (emulated() || hopper) ? 1u : 0u)
            << name;
      }
      const std::string what = "attention H=" + std::to_string(H) + " D=" + std::to_string(D) +
                               " W=" + std::to_string(W) + " k=" + std::to_string(c.kc) + " " +
                               name;
      expect_bf16_close(from_gpu<float>(out), want, 2.0, rms(want) / 8, what);
      // With RoPE undone where the output is written (the combine kernel) or after it: the two
      // ops' bits.
      gpu().rope(out, D, c.positions, freq, true);
      Tensor unrotated = gpu_poisoned(DType::F32, Shape{n, H, D});
      gpu().sparse_attention_unrotated(a, freq, unrotated);
      expect_identical(from_gpu<float>(unrotated), from_gpu<float>(out), what + ", unrotated");
    }
    gpu().set_attention_kernels(K::Auto);
    gpu().set_attention_warpgroups(WG::Auto);
  }

  static std::vector<int64_t> ring_holding(int64_t W, int64_t first, int64_t last) {
    std::vector<int64_t> r(static_cast<size_t>(W), -1);
    for (int64_t p = std::max<int64_t>(0, first); p <= last; ++p) r[static_cast<size_t>(p % W)] = p;
    return r;
  }
};

TEST_F(CudaAttentionTest, DecodeOverRingStepRowAndTopK) {
  AttnCase c{16, 64, 128, {300}, ring_holding(128, 173, 299), 300, 1, 75, 40, 1};
  check(c);
}

// D = 128: window rows of 132 bytes, so keys are staged with 4-byte loads (D = 64's 66-byte rows
// take the byte path; the model's D = 512 the word path, in FullShapes).
TEST_F(CudaAttentionTest, DecodeWithWordAlignedWindowRows) {
  AttnCase c{8, 128, 64, {200}, ring_holding(64, 137, 199), 200, 1, 50, 24, 8};
  check(c);
}

TEST_F(CudaAttentionTest, PrefillWindowOnlyFromPositionZero) {
  AttnCase c{12, 64, 128, {0, 1, 2, 3, 4}, std::vector<int64_t>(128, -1), 0, 5, 0, 0, 2};
  check(c);
}

TEST_F(CudaAttentionTest, ChunkWithStaleRingSlotsAndBlocksAcrossWindowAndTopK) {
  // W = 40: the 64-slot blocks straddle the window and the top-k columns; the ring has gaps
  // and slots holding other positions.
  std::vector<int64_t> ring = ring_holding(40, 100, 129);
  ring[3] = -1;
  ring[5] = 5;  // a stale position
  AttnCase c{8, 96, 40, {130, 131, 132}, ring, 130, 3, 33, 30, 3};
  check(c);
}

TEST_F(CudaAttentionTest, NoValidKeyGivesZero) {
  AttnCase c{8, 64, 16, {5}, std::vector<int64_t>(16, -1), 10, 0, 4, 4, 4};
  check(c);  // the top-k draw may hold entries: then the check is the ordinary one
  AttnCase empty{8, 64, 16, {5}, std::vector<int64_t>(16, -1), 10, 0, 0, 0, 5};
  check(empty);
}

// 40 heads: the tensor-core kernel's last 16-head group is half padding; 12 queries over a ring,
// this step's rows and 150 top-k columns (blocks of window, mixed and top-k slots).
TEST_F(CudaAttentionTest, PrefillChunkWithPaddedHeadGroup) {
  std::vector<int64_t> pos;
  for (int64_t p = 500; p < 512; ++p) pos.push_back(p);
  AttnCase c{40, 128, 64, pos, ring_holding(64, 436, 499), 500, 12, 120, 150, 11};
  check(c);
}

// Head dims 256 and 512: the prefill kernel copies their rows ahead in 8- and 16-byte units
// (D = 64's take 2-byte loads, D = 128's 4-byte copies, in the cases above); 24 heads make two
// head groups, the second half padding. Small enough for the CPU emulation.
TEST_F(CudaAttentionTest, PrefillWithWideHeadsCopiedAhead) {
  std::vector<int64_t> pos = {301, 302, 303};
  AttnCase d256{24, 256, 128, pos, ring_holding(128, 176, 300), 301, 3, 90, 200, 14};
  check(d256);
  AttnCase d512{8, 512, 64, pos, ring_holding(64, 240, 300), 301, 3, 70, 100, 13};
  check(d512);
}

// The window-only layers' decode (one query, and four, over the 128-slot window at V4.1's shapes),
// the window full and still filling.
TEST_F(CudaAttentionTest, FullShapesWindowOnlyDecode) {
  FD_REQUIRE_FULL_SHAPES();
  AttnCase full{64, 512, 128, {5000}, ring_holding(128, 4873, 4999), 5000, 1, 0, 0, 21};
  check(full);
  AttnCase filling{64, 512, 128, {40, 41, 42, 43}, ring_holding(128, 0, 39), 40, 4, 0, 0, 22};
  check(filling);
}

TEST_F(CudaAttentionTest, FullShapes) {
  FD_REQUIRE_FULL_SHAPES();
  AttnCase decode{64, 512, 128, {70000}, ring_holding(128, 69873, 69999), 70000, 1, 16384, 512, 6};
  check(decode);
  std::vector<int64_t> pos;
  for (int64_t p = 70000; p < 70004; ++p) pos.push_back(p);
  AttnCase chunk{64, 512, 128, pos, ring_holding(128, 69876, 69999), 70000, 4, 16384, 512, 7};
  check(chunk);
}

}  // namespace
}  // namespace flashdesk::test
