// session_resume_bench: time to first token when a long chat session is resumed after a restart
// (SSD block restore + encoder bounded replay of W tokens + the new turn) against a full
// re-prefill of the same prompt, measured in the same process; and the bytes the block store
// holds per token against the formula of docs/model-spec.md §6.3. The session is built by a first
// process
// (`--phase build`); a second, new process (`--phase resume`) resumes it: the driver (no --phase)
// runs both. Medians of --repeats for the restore; the re-prefill runs --baseline-repeats times.
// `--chat-turns N`: instead, the KV reuse of each turn of an N-turn thinking chat (the app's
// settings: thinking on, effort 75, exact prefill, greedy), live and resumed after a restart.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // std::regex inside cxxopts (GCC 12)
#endif

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cxxopts.hpp>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_timing.h"
#include "engine/checkpoint/model_stats.h"
#include "engine/runtime/chat_engine.h"
#include "storage/persistent_chat.h"
#include "storage/prefix_planner.h"

namespace fs = std::filesystem;
using namespace flashdesk;
using namespace flashdesk::storage;
using Steady = std::chrono::steady_clock;

namespace {

using flashdesk::bench::median;

struct Config {
  fs::path model;
  fs::path dir;
  int64_t tokens = 32768;  // session length to build
  int64_t turn_tokens = 4096;
  int64_t block = 256;
  int threads = 0;
  int repeats = 3;
  int baseline_repeats = 1;
};

double ms_since(Steady::time_point t) {
  return std::chrono::duration<double, std::milli>(Steady::now() - t).count();
}

TurnOptions turn_options(int64_t max_tokens) {
  TurnOptions t;
  t.mode = ThinkingMode::kChat;
  t.generation.max_new_tokens = max_tokens;
  t.generation.prefill.mode = PrefillMode::Bounded;
  t.generation.prefill.chunk_tokens = 1024;
  return t;
}

// A user message of about `tokens` tokens of varied text (sentences of a measured length).
std::string filler(const Tokenizer& tok, int64_t tokens, int turn) {
  auto sentence = [turn](int i) {
    return "Note " + std::to_string(turn) + "." + std::to_string(i) +
           ": the ferry left at dawn and the harbour lights went out one by one. ";
  };
  const auto per = static_cast<int64_t>(tok.encode(sentence(1000)).size());
  std::string s;
  for (int i = 0; i < std::max<int64_t>(1, tokens / per); ++i) s += sentence(1000 + i);
  return s;
}

PersistentChatOptions chat_options(const Config& c) {
  PersistentChatOptions o{.layout = StorageLayout::in(c.dir)};
  o.blocks.tokens_per_block = c.block;
  o.use_window_pool = false;  // a new process has an empty pool anyway
  return o;
}

int build(const Config& c) {
  auto engine = ChatEngine::load(c.model, EngineOptions{.threads = c.threads});
  PersistentChat chat(*engine, chat_options(c));
  const TurnOptions t = turn_options(4);
  chat.create_session("bench", chat.settings_for(t));
  const auto t0 = Steady::now();
  for (int turn = 0; chat.live_tokens() < c.tokens - 64; ++turn) {
    const int64_t want = std::min(c.turn_tokens, c.tokens - chat.live_tokens() - 32);
    const SessionTurn r = chat.send(filler(engine->tokenizer(), want, turn), t);
    std::fprintf(stderr, "build: turn %d, %lld tokens, %.1f s\n", turn,
                 (long long)chat.live_tokens(), ms_since(t0) / 1000);
    (void)r;
  }
  chat.flush();
  std::printf("built session %lld: %lld tokens in %.1f s\n", (long long)*chat.session_id(),
              (long long)chat.live_tokens(), ms_since(t0) / 1000);
  return 0;
}

int resume(const Config& c) {
  const auto load0 = Steady::now();
  auto engine = ChatEngine::load(c.model, EngineOptions{.threads = c.threads});
  PersistentChat chat(*engine, chat_options(c));
  const double load_ms = ms_since(load0);
  const auto sessions = chat.list_sessions();
  if (sessions.empty()) throw InvalidRequest("no session in " + c.dir.string());
  chat.open_session(sessions.front().id);
  const TurnOptions t = turn_options(1);

  // The resumed turn, as the app runs it (first read of the blocks by this process).
  const SessionTurn first = chat.send("What time did the ferry leave?", t);
  const GenerationStats& s = first.turn.generation.stats;
  const std::vector<TokenId> prompt = first.turn.prompt_ids;

  // Repeats of the same restore through the planner (no live KV, blocks from the SSD).
  std::vector<double> restore_ms{s.ttft_ms}, replay_ms, read_ms;
  read_ms.push_back(s.read_ms + s.load_ms);
  replay_ms.push_back(s.prefill_ms);
  for (int r = 1; r < c.repeats; ++r) {
    const auto t0 = Steady::now();
    PlannedPrefill plan = plan_prefill(
        PrefixSources{engine->model(), engine->fingerprint(), &chat.blocks(), nullptr, 0},
        std::nullopt, prompt);
    GenerationOptions g = t.generation;
    g.prefill.replay = plan.replay;
    const auto suffix =
        std::span<const TokenId>(prompt).subspan(static_cast<size_t>(plan.first_prefill_index()));
    const GenerationResult res = engine->generator().generate(plan.state, suffix, g, {});
    restore_ms.push_back(ms_since(t0));
    read_ms.push_back(plan.read_ms + plan.load_ms);
    replay_ms.push_back(res.stats.prefill_ms);
  }
  // The baseline: a full re-prefill of the same prompt.
  std::vector<double> full_ms;
  for (int r = 0; r < c.baseline_repeats; ++r) {
    SequenceState fresh = engine->model().new_sequence();
    const auto t0 = Steady::now();
    engine->generator().generate(fresh, prompt, t.generation, {});
    full_ms.push_back(ms_since(t0));
  }
  const KvStoreStats kv = chat.blocks().stats();
  const double stored_tokens = static_cast<double>(kv.blocks * c.block);
  const TextConfig& tc = engine->config().text;
  double formula = 0;
  for (int64_t layer : tc.kv_source_layer_ids)
    formula += static_cast<double>(tc.head_dim / 2 + tc.head_dim / 16 + tc.index_head_dim / 2 +
                                   tc.index_head_dim / 32) /
               static_cast<double>(tc.compress_ratios[static_cast<size_t>(layer)]);

  std::printf(
      "\nresume of a %lld-token session (%s, block %lld tokens, threads %d); engine load "
      "%.0f ms (not in TTFT)\n",
      (long long)prompt.size(), engine->name().c_str(), (long long)c.block, c.threads, load_ms);
  std::printf("first resume: %lld from SSD (%lld bytes), %lld replayed, %lld computed\n\n",
              (long long)s.reused_ssd_tokens, (long long)s.bytes_read, (long long)s.replayed_tokens,
              (long long)s.computed_tokens);
  std::printf("| path | TTFT ms (median) | read+load ms | prefill ms | vs full re-prefill |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: |\n");
  const double full = median(full_ms), restored = median(restore_ms);
  std::printf("| full re-prefill (%lld tokens, n=%d) | %.1f | - | %.1f | 1.00x |\n",
              (long long)prompt.size(), c.baseline_repeats, full, full);
  std::printf("| SSD restore + bounded replay (n=%d) | %.1f | %.1f | %.1f | %.1fx faster |\n",
              c.repeats, restored, median(read_ms), median(replay_ms), full / restored);
  std::printf("\n| bytes per token | value | vs formula |\n| --- | ---: | ---: |\n");
  std::printf("| formula (model-spec §6.3, this config) | %.1f | 1.00x |\n", formula);
  const double inspect = kv_bytes_per_token(engine->config()).total();
  std::printf("| inspect (kv_bytes_per_token) | %.1f | %.3fx |\n", inspect, inspect / formula);
  std::printf(
      "| payload read per restored token | %.1f | %.3fx |\n",
      static_cast<double>(s.bytes_read) / static_cast<double>(s.reused_ssd_tokens),
      static_cast<double>(s.bytes_read) / static_cast<double>(s.reused_ssd_tokens) / formula);
  std::printf("| on disk (files, %lld blocks) | %.1f | %.3fx |\n", (long long)kv.blocks,
              static_cast<double>(kv.bytes) / stored_tokens,
              static_cast<double>(kv.bytes) / stored_tokens / formula);
  return 0;
}

// The user messages of the thinking chat: what the demo model was trained on (facts about the
// user, arithmetic, small talk, recall), cycled.
const std::vector<std::string> kChatMessages = {
    "Hi! My name is Quinn.",
    "What is 4821 + 3907?",
    "My favourite animal is the penguin.",
    "What is 9151 - 413?",
    "What is my name?",
    "What is 312 * 47?",
    "Which animal did I say was my favourite?",
    "Are you running on my computer?",
    "What is 6034 + 2789?",
    "Please repeat after me: Ruth, Calgary, fox, Sprout",
};

TurnOptions thinking_turn() {
  TurnOptions t;
  t.mode = ThinkingMode::kThinking;
  t.effort = ReasoningEffort::of(75);
  t.generation.max_new_tokens = 512;
  t.generation.sampling.temperature = 0.0f;
  t.generation.prefill.mode = PrefillMode::Exact;
  return t;
}

// Sends `turns` messages in a new session of `dir`; with `restart`, the chat is closed and opened
// again on the folder before every turn after the first (a new PersistentChat: no live KV, an
// empty window pool; the KV comes back from the SSD blocks).
std::vector<GenerationStats> run_chat(ChatEngine& engine, const Config& c, const fs::path& dir,
                                      int turns, bool restart) {
  fs::remove_all(dir);
  PersistentChatOptions o{.layout = StorageLayout::in(dir)};
  o.blocks.tokens_per_block = c.block;
  auto chat = std::make_unique<PersistentChat>(engine, o);
  const TurnOptions t = thinking_turn();
  const int64_t session = chat->create_session(
      "bench", chat->settings_for(t,
                                  "You are flash-tiny, the demo model that ships with "
                                  "FlashDesk. Answer briefly."));
  std::vector<GenerationStats> out;
  for (int turn = 0; turn < turns; ++turn) {
    if (restart && turn > 0) {
      chat.reset();  // finishes the block writes
      chat = std::make_unique<PersistentChat>(engine, o);
      chat->open_session(session);
    }
    const std::string& text = kChatMessages[static_cast<size_t>(turn) % kChatMessages.size()];
    out.push_back(chat->send(text, t).turn.generation.stats);
  }
  fs::remove_all(dir);
  return out;
}

int chat_reuse(const Config& c, int turns) {
  auto engine = ChatEngine::load(c.model, EngineOptions{.threads = c.threads});
  const auto live = run_chat(*engine, c, c.dir / "live", turns, false);
  const auto resumed = run_chat(*engine, c, c.dir / "resumed", turns, true);
  std::printf(
      "\nKV reuse per turn of a %d-turn thinking chat (%s, effort 75, exact prefill, greedy,"
      " block %lld tokens, W = %lld); resumed = a restart before every turn\n\n",
      turns, engine->name().c_str(), (long long)c.block,
      (long long)engine->config().text.sliding_window);
  std::printf(
      "| turn | live: prompt | reused | replayed | computed | resumed: prompt | from SSD |"
      " replayed | computed |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
      " ---: |\n");
  int64_t sums[4] = {};  // prompt and run-through tokens, live then resumed
  for (size_t i = 0; i < live.size(); ++i) {
    const GenerationStats &a = live[i], &b = resumed[i];
    std::printf("| %zu | %lld | %lld | %lld | %lld | %lld | %lld | %lld | %lld |\n", i + 1,
                (long long)a.prompt_tokens, (long long)a.reused_tokens,
                (long long)a.replayed_tokens, (long long)a.computed_tokens,
                (long long)b.prompt_tokens, (long long)b.reused_ssd_tokens,
                (long long)b.replayed_tokens, (long long)b.computed_tokens);
    const int64_t add[4] = {a.prompt_tokens, a.computed_tokens + a.replayed_tokens, b.prompt_tokens,
                            b.computed_tokens + b.replayed_tokens};
    for (int k = 0; k < 4; ++k) sums[k] += add[k];
  }
  std::printf(
      "\n| run | prompt tokens | run through the model (computed + replayed) | share |\n"
      "| --- | ---: | ---: | ---: |\n");
  std::printf("| live | %lld | %lld | %.1f%% |\n", (long long)sums[0], (long long)sums[1],
              100.0 * static_cast<double>(sums[1]) / static_cast<double>(sums[0]));
  std::printf("| resumed | %lld | %lld | %.1f%% |\n", (long long)sums[2], (long long)sums[3],
              100.0 * static_cast<double>(sums[3]) / static_cast<double>(sums[2]));
  return 0;
}

int drive(const Config& c, const std::string& self, const std::string& args) {
  fs::remove_all(c.dir);
  for (const char* phase : {"build", "resume"}) {
    const std::string cmd = self + " --phase " + phase + " " + args;
    if (std::system(cmd.c_str()) != 0) {
      std::fprintf(stderr, "%s failed\n", phase);
      return 1;
    }
  }
  fs::remove_all(c.dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options opts("session_resume_bench", "Resume TTFT vs full re-prefill");
  opts.add_options()("model", "model directory",
                     cxxopts::value<std::string>()->default_value("assets/models/flash-tiny"))(
      "dir", "data folder (removed before and after)",
      cxxopts::value<std::string>()->default_value("/tmp/fd-session-resume-bench"))(
      "tokens", "session length", cxxopts::value<int64_t>()->default_value("32768"))(
      "turn-tokens", "tokens per user turn while building",
      cxxopts::value<int64_t>()->default_value("4096"))(
      "block", "tokens per KV block", cxxopts::value<int64_t>()->default_value("256"))(
      "threads", "CPU threads (0 = all)", cxxopts::value<int>()->default_value("0"))(
      "repeats", "restore repeats", cxxopts::value<int>()->default_value("3"))(
      "baseline-repeats", "full re-prefill repeats", cxxopts::value<int>()->default_value("1"))(
      "phase", "build or resume (internal)", cxxopts::value<std::string>()->default_value(""))(
      "chat-turns", "measure KV reuse per turn of a thinking chat of N turns instead (0: off)",
      cxxopts::value<int>()->default_value("0"));
  try {
    const auto a = opts.parse(argc, argv);
    Config c{.model = a["model"].as<std::string>(), .dir = a["dir"].as<std::string>()};
    c.tokens = a["tokens"].as<int64_t>();
    c.turn_tokens = a["turn-tokens"].as<int64_t>();
    c.block = a["block"].as<int64_t>();
    c.threads = a["threads"].as<int>();
    c.repeats = std::max(1, a["repeats"].as<int>());
    c.baseline_repeats = std::max(1, a["baseline-repeats"].as<int>());
    if (const int turns = a["chat-turns"].as<int>(); turns > 0) return chat_reuse(c, turns);
    const std::string phase = a["phase"].as<std::string>();
    if (phase == "build") return build(c);
    if (phase == "resume") return resume(c);
    std::string args;
    for (int i = 1; i < argc; ++i) args += std::string("'") + argv[i] + "' ";
    return drive(c, fs::read_symlink("/proc/self/exe").string(), args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
