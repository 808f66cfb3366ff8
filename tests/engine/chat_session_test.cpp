// ChatSession on the demo model (assets/models/flash-tiny): the prompt it reports is the one it
// prefilled, and the live KV follows the conversation. In thinking mode the next rendering drops
// the last answer's reasoning, so each turn cuts the live state back to its window mark (the
// previous prompt's <think>) and computes only the previous answer's text and the new message,
// with the same answer as a session that prefills everything afresh.
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/runtime/chat_engine.h"
#include "engine/tokenizer/reasoning_effort.h"

namespace flashdesk::test {
namespace {

const std::filesystem::path kSource(FD_SOURCE_DIR);

ChatEngine& engine() {
  static std::unique_ptr<ChatEngine> e = [] {
    EngineOptions o;
    o.threads = 2;
    return ChatEngine::load(kSource / "assets/models/flash-tiny", o);
  }();
  return *e;
}

TurnOptions thinking_turn() {
  TurnOptions t;
  t.mode = ThinkingMode::kThinking;
  t.effort = ReasoningEffort::of(75);
  t.generation.max_new_tokens = 64;
  t.generation.prefill.mode = PrefillMode::Exact;
  return t;
}

// Every id the model sampled for an answer.
std::vector<TokenId> sampled(const GenerationResult& g) {
  std::vector<TokenId> ids = g.reasoning_ids;
  ids.insert(ids.end(), g.content_ids.begin(), g.content_ids.end());
  return ids;
}

const std::vector<std::string> kQuestions = {"Hi! My name is Quinn.", "What is 12 + 30?",
                                             "What is my name?"};

TEST(ChatSession, ThinkingTurnsCutTheLiveKvBackToThePreviousPromptExactly) {
  ChatSession live(engine());
  live.set_system_prompt("Be brief.");
  int64_t previous_prompt = 0;
  int reasoned = 0;
  for (const std::string& question : kQuestions) {
    SCOPED_TRACE(question);
    // The same conversation in a session without live KV: everything prefilled afresh.
    ChatSession fresh(engine());
    fresh.set_system_prompt("Be brief.");
    fresh.set_messages(live.messages());
    const TurnResult want = fresh.send(user_turn(question), thinking_turn(), {});

    const TurnResult got = live.send(user_turn(question), thinking_turn(), {});
    ASSERT_EQ(got.prompt_ids, want.prompt_ids);
    const GenerationStats& s = got.generation.stats;
    const auto P = static_cast<int64_t>(got.prompt_ids.size());
    // The previous prompt up to its <think> stays; nothing is replayed.
    EXPECT_EQ(s.reused_tokens, previous_prompt > 0 ? previous_prompt - 1 : 0);
    EXPECT_EQ(s.replayed_tokens, 0);
    EXPECT_EQ(s.computed_tokens, P - s.reused_tokens);
    EXPECT_EQ(sampled(got.generation), sampled(want.generation));  // bit-exact state: same answer
    reasoned += got.generation.stats.thinking_tokens > 1 ? 1 : 0;
    previous_prompt = P;
  }
  EXPECT_GT(reasoned, 0);  // answers whose reasoning the next prompt dropped
}

TEST(ChatSession, AnEditedHistoryCutsBackWithABoundedReplay) {
  ChatSession chat(engine());
  TurnOptions t = thinking_turn();
  t.mode = ThinkingMode::kChat;
  std::string notes;
  for (int i = 1; i <= 20; ++i) notes += "Note " + std::to_string(i) + ": the ship sailed north. ";
  const TurnResult first = chat.send(user_turn(notes), t, {});
  chat.send(user_turn("What is 12 + 30?"), t, {});
  // Regenerate the second answer to another question: the history is cut before it.
  std::vector<ConversationMessage> history = chat.messages();
  history.resize(2);
  chat.set_messages(history);
  const TurnResult edited = chat.send(user_turn("What is 7 + 5?"), t, {});
  const GenerationStats& s = edited.generation.stats;
  const int64_t W = engine().config().text.sliding_window;
  // The first exchange stays; the last W tokens before the cut are replayed.
  ASSERT_GT(static_cast<int64_t>(first.prompt_ids.size()), W);
  EXPECT_GE(s.reused_tokens, static_cast<int64_t>(first.prompt_ids.size()));
  EXPECT_EQ(s.replayed_tokens, W);
  EXPECT_EQ(s.computed_tokens, static_cast<int64_t>(edited.prompt_ids.size()) - s.reused_tokens);
}

TEST(ChatSession, ThePromptTextIsTheTokenisedPrompt) {
  ChatSession chat(engine());
  chat.send(user_turn("Hi! My name is Quinn."), thinking_turn(), {});
  const TurnResult turn = chat.send(user_turn("What is my name?"), thinking_turn(), {});
  // Decoding the ids the model prefilled gives the text the turn reports as sent.
  EXPECT_EQ(engine().tokenizer().decode(turn.prompt_ids), turn.prompt_text);
  EXPECT_NE(turn.prompt_text.find("Reasoning Effort: 75"), std::string::npos);
  EXPECT_EQ(find_effort_line(turn.prompt_text), reasoning_effort_line(ReasoningEffort::of(75)));
}

}  // namespace
}  // namespace flashdesk::test
