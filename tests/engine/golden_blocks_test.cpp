// Per-block golden test (issue 8's done criterion): every block of the every-role checkpoint (and
// of the demo model flash-tiny) is fed the PyTorch oracle's recorded input (--block-inputs
// semantics, DumpRecorder) for a prefill and decode steps, and its output must be within 5e-3 of
// the oracle's: RMS(engine_out - oracle_out) / RMS(oracle_out - oracle_in) as
// tools/compare_logits.py measures it, over the block's prefill and decode rows together (a
// single rounding flip moves one row by 1e-2 - 2e-2, too much for a handful of decode rows
// alone; both parts are printed). One exception, for goldens that keep the oracle's compressed
// KV (flash-tiny): a block may reach kFlipRelErr when the cached compressed entries of its KV
// source differ from the oracle's in at most kMaxCacheFlips values (an FP4 code on the other side
// of a tie). A cached entry is read by every later query, so such a flip is not diluted by
// pooling rows; the test shows it is there instead of assuming it. Expert ids, published top-k ids
// and candidate blocks must match in >= 98% of the rows (the rest: near-ties, docs/goldens.md),
// Engram hash ids in all. Both prefill modes, both CPU backends.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tests/engine/golden_test_util.h"

namespace flashdesk::test {
namespace {

constexpr double kBlockRelErr = 5e-3;
constexpr double kIdMatch = 0.98;
constexpr double kFlipRelErr = 5e-2;
constexpr int64_t kMaxCacheFlips = 2;
// Logits computed from the last block fed the oracle's input: only that block, the final collapse,
// norm and head separate them from the oracle's (measured ~1e-7; a flipped rounding in the last
// block's row moves them ~1e-3).
constexpr double kLogitsRelRms = 1e-2;
constexpr double kNearTie = 0.05;

// Per row of two [rows, width] id arrays: equal as sets of valid (>= 0) ids, or equal outright.
std::vector<bool> rows_match(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                             size_t width, bool as_sets) {
  std::vector<bool> out;
  for (size_t i = 0; i + width <= a.size() && i + width <= b.size(); i += width) {
    std::vector<int64_t> x(a.begin() + i, a.begin() + i + width);
    std::vector<int64_t> y(b.begin() + i, b.begin() + i + width);
    if (as_sets) {
      std::erase_if(x, [](int64_t v) { return v < 0; });
      std::erase_if(y, [](int64_t v) { return v < 0; });
      std::sort(x.begin(), x.end());
      std::sort(y.begin(), y.end());
    }
    out.push_back(x == y);
  }
  return out;
}

struct Rate {
  int64_t matched = 0, rows = 0;
  void add(bool ok) { matched += ok, rows += 1; }
  double value() const { return rows ? double(matched) / double(rows) : 1.0; }
};

struct Rates {
  Rate experts, topk, cands;
  void add(const Rates& o) {
    for (auto [a, b] : {std::pair{&experts, &o.experts}, {&topk, &o.topk}, {&cands, &o.cands}})
      a->matched += b->matched, a->rows += b->rows;
  }
};

std::vector<int64_t> int_values(const NamedTensors& t, const std::string& name) {
  auto it = t.find(name);
  if (it == t.end()) return {};
  const HostTensor& h = it->second;
  std::vector<int64_t> out;
  if (h.dtype == DType::U8)
    for (uint8_t v : h.bytes) out.push_back(v);
  else
    for (int64_t v : h.as<int64_t>()) out.push_back(v);
  return out;
}

std::string role_label(const LayerRole& r) {
  std::string s(attn_role_name(r.role));
  if (r.compress_ratio) s += " m" + std::to_string(r.compress_ratio);
  if (r.builds_candidates) s += "+cand";
  if (r.engram) s += "+engram";
  return s;
}

class GoldenBlocks : public ::testing::TestWithParam<BackendMode> {
 protected:
  // Runs the engine with every block's input taken from the golden; returns its dump tensors.
  void run_engine(const std::filesystem::path& model_dir, const NamedTensors& g,
                  const std::string& backend, const std::string& mode) {
    m_ = load_on(model_dir, backend);
    Model& model = *m_.model;
    const std::vector<int32_t> prompt = ids(g, "prompt_ids"), forced = ids(g, "decode_input_ids");
    P_ = static_cast<int64_t>(prompt.size());
    T_ = static_cast<int64_t>(forced.size());
    SequenceState s = model.new_sequence();
    DumpRecorder pre(model, "prefill_", P_, 0, 0);
    pre.set_block_inputs(&g);
    logits_ = model.prefill(s, prompt, PrefillOptions{parse_prefill_mode(mode), 0, false}, &pre);
    pre.finish(candidate_entries(model, s));
    DumpRecorder dec(model, "decode_", 1, T_, P_);
    dec.set_block_inputs(&g);
    for (int64_t t = 0; t < T_; ++t) {
      dec.begin_step(t);
      const std::vector<float> row = model.decode(s, forced[static_cast<size_t>(t)], &dec);
      logits_.insert(logits_.end(), row.begin(), row.end());
    }
    dec.finish(candidate_entries(model, s));
    cache_flips_.clear();
    for (const LayerRole& r : model.roles()) {
      const std::string name = "decode_compress_kv.layer" + std::to_string(r.layer);
      if (!g.count(name) || !s.global[static_cast<size_t>(r.layer)].entries.defined()) continue;
      const std::vector<float> mine = model.dequantized_entries(s, r.layer), gold = floats(g, name);
      ASSERT_EQ(mine.size(), gold.size()) << name;
      int64_t flips = 0;
      for (size_t i = 0; i < mine.size(); ++i) flips += mine[i] != gold[i];
      cache_flips_[r.layer] = flips;
    }
    eng_ = std::move(pre.tensors());
    for (auto& [name, t] : dec.tensors()) eng_.emplace(name, std::move(t));
  }

  static std::map<int64_t, int64_t> candidate_entries(const Model& model, const SequenceState& s) {
    std::map<int64_t, int64_t> m;
    for (const LayerRole& r : model.roles())
      if (r.builds_candidates) m[r.layer] = s.global[static_cast<size_t>(r.kv_source)].n_entries;
    return m;
  }

  // Relative error of block l in the prefill (rows it ran) and over the decode steps.
  std::pair<ErrSums, ErrSums> block_errors(const NamedTensors& g, int64_t l,
                                           const std::vector<int64_t>& run) const {
    const TextConfig& text = m_.model->config().text;
    const int64_t L = text.num_hidden_layers, hc = text.hc_mult, D = text.hidden_size;
    const Layout pre{1, L, P_, hc, D}, dec{T_, L, 1, hc, D};
    const auto gp = floats(g, "prefill_block_out"), ep = floats(eng_, "prefill_block_out");
    const auto gd = floats(g, "decode_block_out"), ed = floats(eng_, "decode_block_out");
    EXPECT_EQ(gp.size(), pre.at(0, L, 0));
    EXPECT_EQ(gd.size(), dec.at(T_, 0, 0));
    if (ep.size() != pre.at(0, L, 0) || ed.size() != dec.at(T_, 0, 0))
      return {ErrSums{INFINITY, 1}, ErrSums{INFINITY, 1}};
    return {block_error(gp, ep, floats(g, "prefill_embed"), pre, l, run),
            block_error(gd, ed, floats(g, "decode_embed"), dec, l, {})};
  }

  // Rows of layer l whose expert ids, published top-k and candidate blocks agree (the rows the
  // block ran in the prefill, every decode step).
  Rates id_rates(const NamedTensors& g, int64_t l, const std::vector<int64_t>& run) const {
    const TextConfig& text = m_.model->config().text;
    const int64_t L = text.num_hidden_layers;
    const size_t k = static_cast<size_t>(text.num_experts_per_tok);
    const auto ran = [&](const std::string& phase, size_t row) {
      return phase == "decode_" || run[static_cast<size_t>(l * P_) + row] != 0;
    };
    Rates out;
    const auto ex_p =
        rows_match(ints(g, "prefill_expert_ids"), int_values(eng_, "prefill_expert_ids"), k, true);
    const auto ex_d =
        rows_match(ints(g, "decode_expert_ids"), int_values(eng_, "decode_expert_ids"), k, true);
    for (int64_t p = 0; p < P_; ++p)
      if (ran("prefill_", static_cast<size_t>(p)))
        out.experts.add(ex_p[static_cast<size_t>(l * P_ + p)]);
    for (int64_t t = 0; t < T_; ++t) out.experts.add(ex_d[static_cast<size_t>(t * L + l)]);
    for (const std::string phase : {"prefill_", "decode_"}) {
      const std::string topk = phase + "topk_idxs.layer" + std::to_string(l);
      const std::string cand = phase + "candidates.layer" + std::to_string(l);
      if (g.count(topk)) {
        const auto m = rows_match(ints(g, topk), int_values(eng_, topk),
                                  static_cast<size_t>(text.index_topk), true);
        EXPECT_EQ(m.size(), phase == "prefill_" ? size_t(P_) : size_t(T_)) << topk;
        for (size_t i = 0; i < m.size(); ++i)
          if (ran(phase, i)) out.topk.add(m[i]);
      }
      if (g.count(cand)) {
        const auto m = rows_match(int_values(g, cand), int_values(eng_, cand),
                                  static_cast<size_t>(g.at(cand).shape.back()), false);
        for (size_t i = 0; i < m.size(); ++i)
          if (ran(phase, i)) out.cands.add(m[i]);
      }
    }
    return out;
  }

  // Each row of the golden's logits against the engine's: relative RMS, argmax (near-ties aside).
  void check_logits(const NamedTensors& g) {
    if (g.count("prefill_logits") == 0) return;  // flash-tiny's golden leaves them out (size)
    std::vector<float> want = floats(g, "prefill_logits");
    const std::vector<float> d = floats(g, "decode_logits");
    want.insert(want.end(), d.begin(), d.end());
    ASSERT_EQ(want.size(), logits_.size());
    const size_t V = static_cast<size_t>(m_.model->config().text.vocab_size);
    double worst = 0;
    for (size_t r = 0; r < want.size(); r += V) {
      const std::span<const float> a(want.data() + r, V), b(logits_.data() + r, V);
      worst = std::max(worst, relative_rms(a, b));
      const int64_t ia = argmax(a), ib = argmax(b);
      if (ia != ib) {
        EXPECT_LE(a[static_cast<size_t>(ia)] - a[static_cast<size_t>(ib)], kNearTie)
            << "logits row " << r / V << ": argmax " << ib << " vs the oracle's " << ia;
      }
    }
    EXPECT_LE(worst, kLogitsRelRms) << "logits after the last block";
    std::printf("[golden] logits after the last block: worst row relative RMS %.3e\n", worst);
  }

  void check_every_block(const std::string& name, const std::filesystem::path& model_dir,
                         const NamedTensors& g);

  BackendModel m_;
  NamedTensors eng_;
  std::vector<float> logits_;  // the last prefill row, then each decode step's
  // Per KV source whose compressed entries the golden keeps: values differing from the oracle's.
  std::map<int64_t, int64_t> cache_flips_;
  int64_t P_ = 0, T_ = 0;
};

// Runs the model of `model_dir` with every block fed the golden's inputs and checks each block.
void GoldenBlocks::check_every_block(const std::string& name,
                                     const std::filesystem::path& model_dir,
                                     const NamedTensors& g) {
  const auto& [backend, mode] = GetParam();
  ASSERT_NO_FATAL_FAILURE(run_engine(model_dir, g, backend, mode));
  const std::vector<int64_t> run = int_values(g, "prefill_positions_run");
  EXPECT_EQ(int_values(eng_, "prefill_positions_run"), run) << "rows each block ran";
  std::printf(
      "[golden] %s %s %s, per block (P = %lld, T = %lld):\n%5s %-22s %11s %11s %11s %9s %9s\n",
      name.c_str(), backend.c_str(), mode.c_str(), static_cast<long long>(P_),
      static_cast<long long>(T_), "block", "role", "prefill err", "decode err", "all rows",
      "experts", "top-k");
  Rates total;
  for (const LayerRole& r : m_.model->roles()) {
    const auto [pre, dec] = block_errors(g, r.layer, run);
    const double pre_err = pre.ratio(), dec_err = dec.ratio(), err = (pre + dec).ratio();
    const auto flips = cache_flips_.find(r.kv_source);
    const bool flipped =
        flips != cache_flips_.end() && flips->second > 0 && flips->second <= kMaxCacheFlips;
    EXPECT_LE(err, flipped ? kFlipRelErr : kBlockRelErr)
        << "block " << r.layer << " (" << role_label(r) << ")";
    if (flipped && err > kBlockRelErr)
      std::printf(
          "      block %lld: %lld cached compressed value(s) of layer %lld differ from the "
          "oracle's (a rounding flip every later row reads): bound %.0e\n",
          static_cast<long long>(r.layer), static_cast<long long>(flips->second),
          static_cast<long long>(r.kv_source), kFlipRelErr);
    const Rates ids = id_rates(g, r.layer, run);
    total.add(ids);
    std::printf("%5lld %-22s %11.3e %11.3e %11.3e %9.3f %9s\n", static_cast<long long>(r.layer),
                role_label(r).c_str(), pre_err, dec_err, err, ids.experts.value(),
                ids.topk.rows ? std::to_string(ids.topk.value()).substr(0, 5).c_str() : "-");
  }
  EXPECT_GE(total.experts.value(), kIdMatch) << "expert ids over all blocks";
  EXPECT_GE(total.topk.value(), kIdMatch) << "published top-k ids over all index layers";
  EXPECT_GE(total.cands.value(), kIdMatch) << "candidate blocks";
  EXPECT_GT(total.topk.rows, 0);
  EXPECT_GT(total.cands.rows, 0);
  for (const std::string phase : {"prefill_", "decode_"})
    EXPECT_EQ(int_values(eng_, phase + "engram_hash_ids"), ints(g, phase + "engram_hash_ids"))
        << phase << "Engram hash ids (integer maths: must be equal)";
  std::printf(
      "[golden] id match: experts %.4f (%lld rows), top-k %.4f (%lld), candidates %.4f (%lld)\n",
      total.experts.value(), static_cast<long long>(total.experts.rows), total.topk.value(),
      static_cast<long long>(total.topk.rows), total.cands.value(),
      static_cast<long long>(total.cands.rows));
  check_logits(g);
}

TEST_P(GoldenBlocks, EveryRoleBlockFedTheOraclesInputMatchesIt) {
  check_every_block("every-role", golden_every_role_model(),
                    load_golden(golden_dir("every-role") /
                                ("blocks-" + std::get<1>(GetParam()) + ".safetensors")));
}

// The demo model (trained weights, its real Engram map): a 37-token chat prompt, shorter than the
// window, so one golden serves both prefill modes.
TEST_P(GoldenBlocks, FlashTinyBlockFedTheOraclesInputMatchesIt) {
  check_every_block("flash-tiny", std::filesystem::path(FD_SOURCE_DIR) / "assets/models/flash-tiny",
                    load_golden(golden_dir("flash-tiny") / "blocks.safetensors"));
}

INSTANTIATE_TEST_SUITE_P(BothBackendsBothModes, GoldenBlocks, backends_and_modes(),
                         backend_mode_name);

}  // namespace
}  // namespace flashdesk::test
