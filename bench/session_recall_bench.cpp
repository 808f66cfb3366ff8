// session_recall_bench: the demo eval's recall questions (assets/eval/demo/eval.jsonl) answered
// three ways, accuracy side by side per distance: a fresh exact prefill, a fresh bounded prefill,
// and "after a restart": the conversation before the question was prefilled and spilled to an
// SSD block store, then a new store and a new state restore it (SSD blocks + encoder bounded
// replay) and the question runs as the uncached suffix (bounded). Greedy decoding, scored as
// tools/demo/sample.py scores. The restart is a new store and state in this process (the
// cross-process path is tested by tests/storage/chat_session_cli_test.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // std::regex inside cxxopts (GCC 12)
#endif

#include <chrono>
#include <cstdio>
#include <cxxopts.hpp>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "engine/runtime/demo_eval.h"
#include "storage/kv_block_store.h"
#include "storage/kv_spill.h"
#include "storage/prefix_planner.h"
#include "storage/session_store.h"

namespace fs = std::filesystem;
using namespace flashdesk;
using namespace flashdesk::storage;

namespace {

struct Tally {
  int n = 0, exact = 0, bounded = 0, restart = 0;
  int64_t restored = 0, replayed = 0, computed = 0, prompt = 0;
};

GenerationOptions generation(const EvalItem& item, PrefillMode mode, int64_t max_tokens) {
  GenerationOptions g;
  g.max_new_tokens = max_tokens;
  g.starts_in_thinking = item.mode == ThinkingMode::kThinking;
  g.prefill.mode = mode;
  return g;
}

bool score(const EvalItem& item, const GenerationResult& r) {
  return score_answer(item.expected, r.content, item.match, item.distractors);
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options opts("session_recall_bench", "Recall accuracy after a restart vs exact");
  opts.add_options()("model", "model directory",
                     cxxopts::value<std::string>()->default_value("assets/models/flash-tiny"))(
      "data", "eval folder", cxxopts::value<std::string>()->default_value("assets/eval/demo"))(
      "dir", "scratch data folder (removed)",
      cxxopts::value<std::string>()->default_value("/tmp/fd-session-recall-bench"))(
      "per-distance", "items per distance bucket", cxxopts::value<int>()->default_value("4"))(
      "max-tokens", "most tokens per answer", cxxopts::value<int64_t>()->default_value("64"))(
      "block", "tokens per KV block", cxxopts::value<int64_t>()->default_value("256"))(
      "threads", "CPU threads (0 = all)", cxxopts::value<int>()->default_value("0"))(
      "verbose", "print every answer");
  try {
    const auto a = opts.parse(argc, argv);
    const fs::path dir = a["dir"].as<std::string>();
    fs::remove_all(dir);
    auto engine = ChatEngine::load(a["model"].as<std::string>(),
                                   EngineOptions{.threads = a["threads"].as<int>()});
    const int64_t max_tokens = a["max-tokens"].as<int64_t>();
    const StorageLayout layout = StorageLayout::in(dir);
    { SessionStore migrate(layout); }
    KvBlockStoreOptions kv_options;
    kv_options.tokens_per_block = a["block"].as<int64_t>();
    std::map<int64_t, Tally> by_distance;
    std::map<int64_t, int> taken;
    const auto t0 = std::chrono::steady_clock::now();
    for (const EvalItem& item :
         load_eval_items(fs::path(a["data"].as<std::string>()) / "eval.jsonl")) {
      if (item.task != "recall" || item.messages.size() < 2) continue;
      const int64_t distance = std::stoll(item.cell.substr(item.cell.rfind(' ') + 1));
      if (taken[distance]++ >= a["per-distance"].as<int>()) continue;
      const ChatOptions chat{.mode = item.mode, .effort = ReasoningEffort::of(item.effort)};
      const std::vector<TokenId> prompt = engine->chat_template().render(item.messages, chat).ids;
      Tally& t = by_distance[distance];
      ++t.n;
      for (PrefillMode mode : {PrefillMode::Exact, PrefillMode::Bounded}) {
        SequenceState s = engine->model().new_sequence();
        const bool ok = score(
            item, engine->generator().generate(s, prompt, generation(item, mode, max_tokens), {}));
        (mode == PrefillMode::Exact ? t.exact : t.bounded) += ok ? 1 : 0;
      }
      // The earlier turns, as a previous process left them: prefilled, blocks on the SSD.
      ChatOptions history_options = chat;
      history_options.add_generation_prompt = false;
      const std::vector<ChatMessage> history(item.messages.begin(), item.messages.end() - 1);
      const std::vector<TokenId> h = engine->chat_template().render(history, history_options).ids;
      const size_t common = common_prefix(h, prompt);
      {
        KvBlockStore store(layout, kv_options);
        SequenceState s = engine->model().new_sequence();
        engine->model().prefill(s, std::span<const TokenId>(prompt).first(common),
                                PrefillOptions{PrefillMode::Bounded});
        spill_blocks(store, engine->backend(), s, engine->fingerprint(), std::nullopt, 0);
        store.flush();
      }
      KvBlockStore store(layout, kv_options);  // the restart: a new store, a new state
      PlannedPrefill plan =
          plan_prefill(PrefixSources{engine->model(), engine->fingerprint(), &store, nullptr, 0},
                       std::nullopt, prompt);
      GenerationOptions g = generation(item, PrefillMode::Bounded, max_tokens);
      g.prefill.replay = plan.replay;
      const GenerationResult r = engine->generator().generate(
          plan.state,
          std::span<const TokenId>(prompt).subspan(static_cast<size_t>(plan.first_prefill_index())),
          g, {});
      t.restart += score(item, r) ? 1 : 0;
      if (a.count("verbose"))
        std::printf("%s expected '%s': restart answered '%s' (thinking %lld tokens)\n",
                    item.id.c_str(), item.expected.c_str(), r.content.c_str(),
                    (long long)r.stats.thinking_tokens);
      t.restored += plan.reused_ssd;
      t.replayed += r.stats.replayed_tokens;
      t.computed += r.stats.computed_tokens;
      t.prompt += static_cast<int64_t>(prompt.size());
    }
    std::printf("recall after a restart (%s, block %lld tokens, %.0f s)\n\n",
                engine->name().c_str(), (long long)kv_options.tokens_per_block,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    std::printf(
        "| distance | n | exact | bounded | restart (SSD + bounded replay) | restart vs "
        "exact | mean prompt | mean restored | mean replayed | mean computed |\n");
    std::printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    Tally all;
    auto row = [](const std::string& name, const Tally& t) {
      auto pct = [&](int k) { return 100.0 * k / std::max(1, t.n); };
      std::printf("| %s | %d | %.0f%% | %.0f%% | %.0f%% | %+.0f pt | %lld | %lld | %lld | %lld |\n",
                  name.c_str(), t.n, pct(t.exact), pct(t.bounded), pct(t.restart),
                  pct(t.restart) - pct(t.exact), (long long)(t.prompt / std::max(1, t.n)),
                  (long long)(t.restored / std::max(1, t.n)),
                  (long long)(t.replayed / std::max(1, t.n)),
                  (long long)(t.computed / std::max(1, t.n)));
    };
    for (const auto& [d, t] : by_distance) {
      row(std::to_string(d), t);
      all.n += t.n, all.exact += t.exact, all.bounded += t.bounded, all.restart += t.restart;
      all.restored += t.restored, all.replayed += t.replayed, all.computed += t.computed;
      all.prompt += t.prompt;
    }
    row("all", all);
    fs::remove_all(dir);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
