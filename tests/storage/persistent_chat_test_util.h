// Shared helpers of the tests that run storage::PersistentChat on the demo model
// (session_resume_test.cpp, session_images_test.cpp): the engine, small KV blocks, greedy turns.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/runtime/chat_engine.h"
#include "storage/persistent_chat.h"
#include "storage_test_util.h"

namespace flashdesk::storage::testing {

inline const std::filesystem::path kDemoModel =
    std::filesystem::path(FD_SOURCE_DIR) / "assets/models/flash-tiny";
// Tokens per KV block in these tests: a multiple of flash-tiny's ratios (1, 2) and candidate
// block (8), small so that short chats span several blocks.
inline constexpr int64_t kBlock = 32;

inline std::unique_ptr<ChatEngine> load_engine(const std::filesystem::path& dir = kDemoModel) {
  return ChatEngine::load(dir, EngineOptions{.backend = "cpu", .threads = 2});
}

inline PersistentChatOptions chat_options(const TempDir& dir) {
  PersistentChatOptions o{.layout = dir.layout()};
  o.blocks.tokens_per_block = kBlock;
  return o;
}

// Chat mode, greedy (answers are a function of the logits), `max_tokens` at most.
inline TurnOptions turn_options(PrefillMode mode, int64_t max_tokens = 6) {
  TurnOptions t;
  t.mode = ThinkingMode::kChat;
  t.generation.max_new_tokens = max_tokens;
  t.generation.sampling.temperature = 0.0f;
  t.generation.prefill.mode = mode;
  return t;
}

inline std::string long_text(int sentences) {
  std::string s;
  for (int i = 0; i < sentences; ++i)
    s += "Sentence " + std::to_string(i) + " talks about the river, the hills and the old mill. ";
  return s;
}

// The generated ids, thinking first.
inline std::vector<TokenId> answer_ids(const GenerationResult& g) {
  std::vector<TokenId> ids = g.reasoning_ids;
  ids.insert(ids.end(), g.content_ids.begin(), g.content_ids.end());
  return ids;
}

}  // namespace flashdesk::storage::testing
