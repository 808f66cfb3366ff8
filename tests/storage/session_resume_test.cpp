// Sessions that survive a restart, end to end with the demo model (assets/models/flash-tiny), real
// SQLite files and real block files: build a session, destroy every object, reopen and continue.
// The KV must come from the SSD (the stats say so and only suffix + replay is computed) and give
// what the prefill modes promise; a changed model reuses nothing; a damaged block is recomputed.
#include <gtest/gtest.h>

#include <fstream>
#include <numeric>

#include "engine/runtime/chat_engine.h"
#include "persistent_chat_test_util.h"
#include "storage/kv_block_file.h"
#include "storage/kv_payload.h"
#include "storage/persistent_chat.h"
#include "storage/prefix_planner.h"
#include "storage_test_util.h"

namespace flashdesk::storage {
namespace {

using testing::answer_ids;
using testing::chat_options;
using testing::kBlock;
using testing::kDemoModel;
using testing::load_engine;
using testing::long_text;
using testing::TempDir;
using testing::turn_options;

std::string file_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A fresh-process generation of `prompt` with no cache at all: the reference.
std::vector<TokenId> fresh_answer(ChatEngine& engine, const std::vector<TokenId>& prompt,
                                  const TurnOptions& t) {
  SequenceState s = engine.model().new_sequence();
  return answer_ids(engine.generator().generate(s, prompt, t.generation, {}));
}

// The answer a fresh sequence gives when it computes the prompt as the live one did: the rows
// below each earlier turn's mark as part of that turn's prompt (top-k rows as wide as that
// prompt's entries, docs/numerics.md "Top-k"), then the rest. `earlier` lists the earlier turns'
// prompt lengths; turn k kept its rows up to its mark, the prompt's last token.
std::vector<TokenId> history_answer(ChatEngine& engine, const std::vector<TokenId>& prompt,
                                    const std::vector<int64_t>& earlier, const TurnOptions& t) {
  Model& model = engine.model();
  SequenceState s = model.new_sequence();
  for (const int64_t P : earlier) {
    const int64_t from = s.position(), mark = P - 1;
    SequenceStep step;
    step.state = &s;
    step.tokens = std::span<const TokenId>(prompt).subspan(static_cast<size_t>(from),
                                                           static_cast<size_t>(mark - from));
    step.prompt_end = P;
    step.logits = LogitsWanted::None;
    model.step(std::span<SequenceStep>(&step, 1));
  }
  const auto rest = std::span<const TokenId>(prompt).subspan(static_cast<size_t>(s.position()));
  return answer_ids(engine.generator().generate(s, rest, t.generation, {}));
}

// Persisted bytes per token by the formula of docs/model-spec.md §6.3: per KV source, (entry +
// index-key row) / m.
double formula_bytes_per_token(const ModelConfig& c) {
  const TextConfig& t = c.text;
  const double row =
      t.head_dim / 2 + t.head_dim / 16 + t.index_head_dim / 2 + t.index_head_dim / 32;
  double per_token = 0;
  for (int64_t layer : t.kv_source_layer_ids)
    per_token += row / static_cast<double>(t.compress_ratios[static_cast<size_t>(layer)]);
  return per_token;
}

struct Built {
  int64_t session = 0;
  std::vector<TokenId> live_tokens;
  std::vector<GlobalKvRows> live_rows;  // the live state's global KV before the "restart"
};

// Two turns in a new session, then everything is destroyed (blocks flushed first).
Built build_session(const TempDir& dir, PrefillMode mode, int sentences) {
  auto engine = load_engine();
  Built b;
  PersistentChat chat(*engine, chat_options(dir));
  const TurnOptions t = turn_options(mode);
  b.session = chat.create_session("resume", chat.settings_for(t, "Be brief."));
  chat.send(long_text(sentences), t);
  const SessionTurn second = chat.send("And the mill?", t);
  EXPECT_GT(second.turn.generation.stats.reused_ram_tokens, 0);  // live KV between turns
  EXPECT_EQ(second.turn.generation.stats.reused_ssd_tokens, 0);
  chat.flush();
  b.live_tokens = chat.live_state()->tokens;
  b.live_rows =
      read_prefix_rows(engine->backend(), *chat.live_state(), chat.live_tokens() / kBlock * kBlock);
  return b;
}

TEST(SessionResume, RestartRestoresFromSsdWithBoundedReplay) {
  TempDir dir;
  const Built b = build_session(dir, PrefillMode::Bounded, 40);  // several windows long
  auto engine = load_engine();
  PersistentChat chat(*engine, chat_options(dir));
  chat.open_session(b.session);
  ASSERT_EQ(chat.messages().size(), 4u);
  const TurnOptions t = turn_options(PrefillMode::Bounded);
  const SessionTurn turn = chat.send("Tell me more.", t);
  const GenerationStats& s = turn.turn.generation.stats;
  const auto P = static_cast<int64_t>(turn.turn.prompt_ids.size());
  const int64_t W = engine->config().text.sliding_window;
  // Every full block of the old conversation is on the SSD; the prompt extends it.
  const int64_t expected_ssd =
      std::min<int64_t>(static_cast<int64_t>(b.live_tokens.size()), P - 1) / kBlock * kBlock;
  ASSERT_GT(expected_ssd, 2 * W);
  EXPECT_EQ(s.reused_ssd_tokens, expected_ssd);
  EXPECT_EQ(s.reused_ram_tokens, 0);
  EXPECT_EQ(s.reused_pool_tokens, 0);
  EXPECT_EQ(s.replayed_tokens, W);
  EXPECT_EQ(s.computed_tokens, P - expected_ssd);
  EXPECT_EQ(s.prompt_tokens, P);
  EXPECT_DOUBLE_EQ(static_cast<double>(s.bytes_read),
                   formula_bytes_per_token(engine->config()) * static_cast<double>(expected_ssd));
  EXPECT_EQ(turn.corrupt_blocks, 0);
  // The restored global KV is byte for byte the one the first process held.
  const auto rows = read_prefix_rows(engine->backend(), *chat.live_state(), expected_ssd);
  for (size_t l = 0; l < rows.size(); ++l) {
    if (b.live_rows[l].n == 0) continue;
    const size_t eb = rows[l].entries.size(), kb = rows[l].index_keys.size();
    ASSERT_LE(eb, b.live_rows[l].entries.size());
    EXPECT_TRUE(
        std::equal(rows[l].entries.begin(), rows[l].entries.end(), b.live_rows[l].entries.begin()))
        << "layer " << l;
    EXPECT_TRUE(std::equal(rows[l].index_keys.begin(), rows[l].index_keys.end(),
                           b.live_rows[l].index_keys.begin()))
        << "layer " << l;
    (void)kb;
  }
  // The answer is the one a restore of the same rows from RAM gives (bounded replay's promise).
  SequenceState ref = engine->model().new_sequence();
  std::vector<GlobalKvRows> ram_rows = b.live_rows;
  for (size_t l = 0; l < ram_rows.size(); ++l) {
    const GlobalKv& g = ref.global[l];
    if (g.ratio <= 0) continue;
    const int64_t n = expected_ssd / g.ratio;
    ram_rows[l].n = n;
    ram_rows[l].entries.resize(static_cast<size_t>(n * g.entries.dim(1)));
    ram_rows[l].index_keys.resize(static_cast<size_t>(n * g.index_keys.dim(1)));
  }
  load_prefix(
      engine->backend(), ref,
      std::span<const TokenId>(turn.turn.prompt_ids).first(static_cast<size_t>(expected_ssd)),
      ram_rows);
  GenerationOptions g = t.generation;
  g.prefill.replay = W;
  const auto tail =
      std::span<const TokenId>(turn.turn.prompt_ids).subspan(static_cast<size_t>(expected_ssd - W));
  EXPECT_EQ(answer_ids(turn.turn.generation),
            answer_ids(engine->generator().generate(ref, tail, g, {})));
}

TEST(SessionResume, PrefixShorterThanTheWindowIsRecomputedExactly) {
  TempDir dir;
  // One short turn: its full blocks are on the SSD, but a restore would replay all of them
  // (replay = min(W, prefix)), so the planner computes the prompt afresh and the exact mode's
  // answer is the one of a fresh exact prefill.
  int64_t session = 0;
  {
    auto engine = load_engine();
    PersistentChat chat(*engine, chat_options(dir));
    const TurnOptions t = turn_options(PrefillMode::Exact, 2);
    session = chat.create_session("short", chat.settings_for(t));
    const SessionTurn first = chat.send(long_text(4), t);
    ASSERT_GE(first.blocks_queued, 2);
    chat.flush();
  }
  auto engine = load_engine();
  PersistentChat chat(*engine, chat_options(dir));
  chat.open_session(session);
  const TurnOptions t = turn_options(PrefillMode::Exact, 8);
  const SessionTurn turn = chat.send("Why?", t);
  const GenerationStats& s = turn.turn.generation.stats;
  ASSERT_LE(static_cast<int64_t>(turn.turn.prompt_ids.size()),
            engine->config().text.sliding_window);
  EXPECT_EQ(s.reused_tokens, 0);
  EXPECT_EQ(s.bytes_read, 0);
  EXPECT_EQ(s.computed_tokens, static_cast<int64_t>(turn.turn.prompt_ids.size()));
  EXPECT_EQ(answer_ids(turn.turn.generation), fresh_answer(*engine, turn.turn.prompt_ids, t));
}

TEST(SessionResume, ChangedModelFingerprintReusesNothing) {
  TempDir dir;
  const Built b = build_session(dir, PrefillMode::Bounded, 12);
  // The same weights under a config.json that differs by one byte: another fingerprint.
  TempDir model_copy;
  std::filesystem::copy(kDemoModel, model_copy.path() / "m",
                        std::filesystem::copy_options::recursive);
  { std::ofstream(model_copy.path() / "m/config.json", std::ios::app) << "\n"; }
  auto engine = load_engine(model_copy.path() / "m");
  auto original = load_engine();
  ASSERT_NE(engine->fingerprint(), original->fingerprint());
  PersistentChat chat(*engine, chat_options(dir));
  chat.open_session(b.session);
  const TurnOptions t = turn_options(PrefillMode::Bounded);
  const SessionTurn turn = chat.send("Tell me more.", t);
  const GenerationStats& s = turn.turn.generation.stats;
  EXPECT_EQ(s.reused_tokens, 0);
  EXPECT_EQ(s.reused_ssd_tokens, 0);
  EXPECT_EQ(s.bytes_read, 0);
  EXPECT_EQ(s.computed_tokens, static_cast<int64_t>(turn.turn.prompt_ids.size()));
  EXPECT_EQ(answer_ids(turn.turn.generation), fresh_answer(*engine, turn.turn.prompt_ids, t));
}

TEST(SessionResume, CorruptBlockIsRecomputedNeverUsed) {
  TempDir dir;
  const Built b = build_session(dir, PrefillMode::Bounded, 12);
  auto engine = load_engine();
  // Flip one payload byte of the second block of the conversation.
  const auto keys = chain_block_keys(engine->fingerprint(), b.live_tokens, {}, kBlock);
  ASSERT_GE(keys.size(), 3u);
  const auto file = block_file_path(dir.layout().kv_dir(), keys[1]);
  ASSERT_TRUE(std::filesystem::exists(file));
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(file) / 2));
    char c = 0;
    f.read(&c, 1);
    f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(file) / 2));
    c = static_cast<char>(c ^ 0x10);
    f.write(&c, 1);
  }
  const std::string corrupt = file_bytes(file);
  PersistentChat chat(*engine, chat_options(dir));
  chat.open_session(b.session);
  const TurnOptions t = turn_options(PrefillMode::Bounded);
  const SessionTurn turn = chat.send("Tell me more.", t);
  const GenerationStats& s = turn.turn.generation.stats;
  EXPECT_EQ(turn.corrupt_blocks, 1);
  EXPECT_EQ(s.reused_ssd_tokens, kBlock);  // only the block before the damaged one
  EXPECT_EQ(s.replayed_tokens, kBlock);
  EXPECT_EQ(s.computed_tokens, static_cast<int64_t>(turn.turn.prompt_ids.size()) - kBlock);
  // Deleted, and written again after the turn: block writes are asynchronous, so the new file
  // may already be there now; after flush() it must be, without the flipped byte.
  EXPECT_GE(turn.blocks_queued, 1);
  chat.flush();
  ASSERT_TRUE(std::filesystem::exists(file));
  EXPECT_NE(file_bytes(file), corrupt);
  EXPECT_EQ(chat.blocks().stats().reads_corrupt, 1);
}

TEST(SessionResume, ThinkingTurnsCutTheLiveKvBackToThePromptEnd) {
  // The next prompt drops the answer's reasoning from the previous prompt's <think> on: the live
  // state is cut back exactly to the window mark taken there, nothing is replayed, and the answer
  // is the one of a fresh sequence that computes the prompt as the live one did (a one-shot
  // prefill can keep other exactly tied top-k entries: docs/numerics.md "Top-k"). Blocks are
  // written only before the mark (the reasoning's blocks would never match) and the state is cut
  // back to the mark after each turn, so a session switch restores the parked window exactly and a
  // restart restores the blocks and replays the window.
  TempDir dir;
  TurnOptions t = turn_options(PrefillMode::Exact, 24);
  t.mode = ThinkingMode::kThinking;
  TurnOptions reference = t;  // a cache-free generation of the same prompt, in thinking mode
  reference.generation.starts_in_thinking = true;
  int64_t session = 0;
  std::vector<TokenId> last_prompt;
  {
    auto engine = load_engine();
    PersistentChat chat(*engine, chat_options(dir));
    session = chat.create_session("think", chat.settings_for(t));
    int64_t previous = 0;
    std::vector<int64_t> earlier;
    for (const std::string& text : {long_text(12), std::string("More?"), std::string("Why?")}) {
      SCOPED_TRACE(text);
      const SessionTurn turn = chat.send(text, t);
      const GenerationStats& s = turn.turn.generation.stats;
      const auto P = static_cast<int64_t>(turn.turn.prompt_ids.size());
      EXPECT_EQ(s.reused_ram_tokens, previous > 0 ? previous - 1 : 0);
      EXPECT_EQ(s.replayed_tokens, 0);
      EXPECT_EQ(s.computed_tokens, P - s.reused_ram_tokens);
      EXPECT_EQ(answer_ids(turn.turn.generation),
                history_answer(*engine, turn.turn.prompt_ids, earlier, reference));
      previous = P;
      earlier.push_back(P);
      last_prompt = turn.turn.prompt_ids;
    }
    chat.flush();
    const auto mark = static_cast<int64_t>(last_prompt.size()) - 1;
    EXPECT_EQ(chat.live_tokens(), mark);                     // the answer is released
    EXPECT_EQ(chat.blocks().stats().blocks, mark / kBlock);  // none from the reasoning on
    // Another session and back: the window parked at the mark serves the next prompt exactly.
    chat.create_session("other", chat.settings_for(t));
    chat.send("Hello.", t);
    chat.open_session(session);
    const SessionTurn back = chat.send("And then?", t);
    const GenerationStats& s = back.turn.generation.stats;
    EXPECT_EQ(s.reused_ssd_tokens + s.reused_pool_tokens, mark);
    // The pool serves the rows past the last whole block; a mark at a block's end (the answers'
    // lengths decide: the 2143-step demo model's land there) takes everything from the SSD.
    if (mark % kBlock != 0)
      EXPECT_GT(s.reused_pool_tokens, 0);
    else
      EXPECT_EQ(s.reused_ssd_tokens, mark);
    EXPECT_EQ(s.replayed_tokens, 0);
    // Its rows below the mark were computed turn by turn, as history_answer computes them.
    EXPECT_EQ(answer_ids(back.turn.generation),
              history_answer(*engine, back.turn.prompt_ids, earlier, reference));
    last_prompt = back.turn.prompt_ids;
    chat.flush();
  }
  auto engine = load_engine();
  PersistentChat chat(*engine, chat_options(dir));
  chat.open_session(session);
  const SessionTurn resumed = chat.send("Again?", t);
  const GenerationStats& s = resumed.turn.generation.stats;
  const int64_t restored = (static_cast<int64_t>(last_prompt.size()) - 1) / kBlock * kBlock;
  ASSERT_GT(restored, engine->config().text.sliding_window);
  EXPECT_EQ(s.reused_ssd_tokens, restored);
  EXPECT_EQ(s.replayed_tokens, engine->config().text.sliding_window);
  EXPECT_EQ(s.computed_tokens, static_cast<int64_t>(resumed.turn.prompt_ids.size()) - restored);
}

TEST(SessionResume, AnswerTokensAreLoggedAndStoppedAnswersInterrupted) {
  TempDir dir;
  auto engine = load_engine();
  PersistentChat chat(*engine, chat_options(dir));
  const TurnOptions t = turn_options(PrefillMode::Bounded, 5);
  chat.create_session("log", chat.settings_for(t));
  const SessionTurn done = chat.send("Hello there.", t);
  std::atomic<bool> stop{true};  // stops after the first token
  const SessionTurn stopped = chat.send("Again.", t, {}, &stop);
  EXPECT_EQ(stopped.status, MessageStatus::interrupted);
  const auto messages = chat.messages();
  ASSERT_EQ(messages.size(), 4u);
  EXPECT_EQ(messages[1].status, MessageStatus::complete);
  EXPECT_EQ(messages[1].text, done.turn.generation.content);
  EXPECT_EQ(static_cast<int64_t>(messages[1].token_ids.size()),
            done.turn.generation.stats.generated_tokens);
  EXPECT_EQ(messages[3].status, MessageStatus::interrupted);
  EXPECT_EQ(messages[3].token_ids.size(), 1u);
}

TEST(SessionResume, DeletingASessionErasesItsBlocks) {
  TempDir dir;
  auto engine = load_engine();
  PersistentChat chat(*engine, chat_options(dir));
  const TurnOptions t = turn_options(PrefillMode::Bounded, 3);
  const int64_t id = chat.create_session("gone", chat.settings_for(t));
  const SessionTurn turn = chat.send(long_text(10), t);
  ASSERT_GT(turn.blocks_queued, 0);
  const EraseReport report = chat.delete_session(id);
  EXPECT_EQ(report.blocks_removed, turn.blocks_queued);
  EXPECT_FALSE(chat.session_id().has_value());
  EXPECT_EQ(chat.blocks().stats().blocks, 0);
  EXPECT_THROW(chat.send("Hello?", t), InvalidRequest);
}

TEST(SessionResume, SwitchingSessionsRestoresTheParkedWindow) {
  TempDir dir;
  auto engine = load_engine();
  PersistentChat chat(*engine, chat_options(dir));
  const TurnOptions t = turn_options(PrefillMode::Exact, 4);
  const int64_t a = chat.create_session("a", chat.settings_for(t));
  chat.send(long_text(10), t);
  const std::vector<TokenId> a_tokens = chat.live_state()->tokens;
  chat.flush();
  chat.create_session("b", chat.settings_for(t));  // parks a's window
  chat.send("Something else.", t);
  chat.flush();
  chat.open_session(a);
  const SessionTurn turn = chat.send("Go on.", t);
  const GenerationStats& s = turn.turn.generation.stats;
  const auto T = static_cast<int64_t>(a_tokens.size());
  EXPECT_EQ(s.reused_ssd_tokens, T / kBlock * kBlock);
  EXPECT_EQ(s.reused_pool_tokens, T - T / kBlock * kBlock);
  EXPECT_EQ(s.replayed_tokens, 0);
  EXPECT_EQ(s.computed_tokens, static_cast<int64_t>(turn.turn.prompt_ids.size()) - T);
  // The parked window and tail restore the state exactly: the same answer as without a switch.
  TempDir other_dir;
  PersistentChat other(*engine, chat_options(other_dir));
  other.create_session("a", other.settings_for(t));
  other.send(long_text(10), t);
  const SessionTurn direct = other.send("Go on.", t);
  EXPECT_EQ(direct.turn.generation.stats.reused_ram_tokens, T);
  EXPECT_EQ(answer_ids(turn.turn.generation), answer_ids(direct.turn.generation));
}

}  // namespace
}  // namespace flashdesk::storage
