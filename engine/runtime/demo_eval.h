// The demo model's evaluation: held-out items written by tools/demo/make_eval.py (JSONL), run
// through the engine with greedy decoding and scored exactly as tools/demo/sample.py scores them.
//
// Goals: one table that shows what the demo model can do — recall by distance, arithmetic
// accuracy and thinking length by effort, image questions — in exact and bounded prefill side
// by side. Non-goals: general benchmarks, sampling-based scores.
#pragma once

#include <cstdint>
#include <filesystem>
#include <istream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/runtime/chat_engine.h"

namespace flashdesk {

struct EvalItem {
  std::string id;
  std::string task;  // recall | arithmetic | image | ...
  ThinkingMode mode = ThinkingMode::kThinking;
  int effort = 75;
  std::vector<ChatMessage> messages;     // the prompt (the answer is generated)
  std::vector<std::string> image_paths;  // resolved against the eval.jsonl directory
  std::string prompt_text;  // the Python renderer's prompt, to cross-check the C++ template
  std::string expected;
  std::string match = "contains";  // exact | contains
  std::vector<std::string> distractors;
  std::string cell;                // the table row: "recall 500", "add e25", "image color", ...
  std::string reference_thinking;  // the generator's own thinking for this item ("" if none)
};

// Reads eval.jsonl; a malformed line is a FormatError naming the file and the line.
std::vector<EvalItem> load_eval_items(const std::filesystem::path& jsonl);
// The same from a stream; image paths are resolved against jsonl's directory.
std::vector<EvalItem> parse_eval_items(std::istream& in, const std::filesystem::path& jsonl);

// tools/demo/sample.py score_answer: exact -> the stripped answer equals `expected`; contains ->
// `expected` occurs as a whole-word sequence (case-insensitive, punctuation ignored) and no
// distractor does.
bool score_answer(const std::string& expected, const std::string& answer, const std::string& match,
                  const std::vector<std::string>& distractors);

struct EvalOutcome {
  bool correct = false;
  bool template_matches = false;  // the C++ rendering equals the item's prompt_text
  int64_t thinking_tokens = 0;
  std::string thinking;
  std::string answer;
};

struct EvalCell {
  int64_t n = 0, correct = 0, thinking_tokens = 0;
  double accuracy() const { return n ? static_cast<double>(correct) / n : 0.0; }
  double mean_thinking() const { return n ? static_cast<double>(thinking_tokens) / n : 0.0; }
};

class DemoEval {
 public:
  DemoEval(ChatEngine& engine, int64_t max_new_tokens) : engine_(engine), max_(max_new_tokens) {}
  // Greedy generation for one item; items with images need a model with a vision tower
  // (InvalidRequest otherwise) and their files (IoError / FormatError).
  EvalOutcome run(const EvalItem& item, PrefillMode mode);
  // The item's prompt as the C++ chat template renders it (image grids from its pictures): what
  // must equal the Python renderer's prompt_text.
  std::string render_prompt_text(const EvalItem& item) const;

 private:
  struct Prompt {
    ChatOptions chat;
    std::vector<ImageRef> images;
    std::vector<ChatMessage> messages;  // with each image part's grid
  };
  Prompt prompt_of(const EvalItem& item) const;

  ChatEngine& engine_;
  int64_t max_;
};

}  // namespace flashdesk
