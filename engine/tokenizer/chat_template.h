// The DeepSeek-V4.1 chat format (docs/model-spec.md §9.3): renders a conversation to prompt ids,
// with image placeholders expanded to token grids.
//
// Layout, as the V4.1 release encoder renders it:
//   <BOS>
//   at message 0: <｜System｜> when it is a system message or in thinking mode; in thinking mode
//     then "Reasoning Effort: N (range 1-100, ...)\n\n"; then the system text, if any
//   user turn:     <｜User｜>{parts joined by "\n\n"; an image part is <｜deepseek_image｜>}
//   later system:  <｜System｜>{text}
//   assistant header, after the user/system message it answers:
//     <｜Assistant｜><think>   thinking mode, for the answer to the last user message
//     <｜Assistant｜></think>  chat mode, and every earlier answer (its reasoning is dropped)
//   assistant turn: [{reasoning}</think> only when its header was
//   <think>]{content}<｜end▁of▁sentence｜> generation prompt: the header that answers the last
//   message.
// Message text is encoded as the reference encodes its rendered string: an added token spelled
// in the text becomes that token (the image placeholder is refused; images are parts).
// Tools, DSML and task tokens are not implemented.
//
// Prefix rules (what makes the KV prefix cache hit across turns; tested in chat_template_test):
//  1. A rendering without generation prompt of a conversation that ends with a user message is a
//     prefix of the rendering of any conversation that continues it.
//  2. Let P be the prompt of a conversation ending with a user message (with generation prompt)
//     and G the ids the model generated, up to and including <｜end▁of▁sentence｜>. Appending the
//     answer as an assistant message that carries G's ids (content_ids, and reasoning_ids in
//     thinking mode) renders, without generation prompt, exactly P ++ G.
//  3. Chat mode, or keep_reasoning: P ++ G is a prefix of the prompt after the next user turn.
//  4. Thinking mode (reasoning dropped): P without its final <think> is a prefix of the next
//     prompt, which continues with </think>{content}<EOS>: the cache keeps everything up to the
//     answer's <｜Assistant｜>; the answer's visible content is prefilled again, its reasoning not.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/tokenizer/reasoning_effort.h"
#include "engine/tokenizer/special_tokens.h"
#include "engine/tokenizer/tokenizer.h"

namespace flashdesk {

enum class ThinkingMode { kChat, kThinking };

// The grid of LLM tokens an image becomes (docs/model-spec.md §8): rows × cols aligner outputs.
struct ImageGrid {
  int rows = 0;  // n_llm_h
  int cols = 0;  // n_llm_w
  // Positions in the prompt: IMAGE_START, (IMAGE × cols, IMAGE_NEW_LINE) × rows, IMAGE_END.
  size_t token_count() const { return 2 + size_t(rows) * (size_t(cols) + 1); }
};

struct ContentPart {
  enum class Kind { kText, kImage } kind = Kind::kText;
  std::string text;  // kText
  ImageGrid grid;    // kImage

  static ContentPart of_text(std::string text) { return {Kind::kText, std::move(text), {}}; }
  static ContentPart of_image(ImageGrid grid) { return {Kind::kImage, {}, grid}; }
};

enum class Role { kSystem, kUser, kAssistant };

struct ChatMessage {
  Role role = Role::kUser;
  std::vector<ContentPart> content;  // system and assistant messages hold text parts only
  std::string reasoning;             // assistant: what the model wrote between <think> and </think>
  // Assistant: the exact ids the model generated for the content (before <EOS>) and for the
  // reasoning (before </think>). They replace the text when rendering, so the rendering repeats
  // the generated tokens even where they differ from encoding the text afresh (prefix rule 2).
  std::optional<std::vector<TokenId>> content_ids;
  std::optional<std::vector<TokenId>> reasoning_ids;

  static ChatMessage system(std::string text);
  static ChatMessage user(std::string text);
  static ChatMessage assistant(std::string content, std::string reasoning = {});
  static ChatMessage of_parts(Role role, std::vector<ContentPart> parts);
};

struct ChatOptions {
  ThinkingMode mode = ThinkingMode::kThinking;
  ReasoningEffort effort;             // stated only in thinking mode
  bool add_generation_prompt = true;  // end with the header of the answer to generate
  bool keep_reasoning = false;        // keep every answer's reasoning (off: the V4.1 default)
};

// Where one image's positions lie in the ids; every one carries the image token id, and the
// model overwrites their embeddings (start, rows of cells + newline, end).
struct ImageSpan {
  size_t begin = 0;  // index of IMAGE_START
  size_t end = 0;    // one past IMAGE_END
  ImageGrid grid;
};

struct RenderedPrompt {
  std::vector<TokenId> ids;
  std::vector<ImageSpan> images;  // in prompt order
  // The same prompt as text, as the ids say it: special tokens by spelling, one placeholder per
  // image, and answers given by ids (ChatMessage::content_ids, reasoning_ids) decoded from those
  // ids rather than taken from their text. What a user is shown as "sent".
  std::string text;
};

class ChatTemplate {
 public:
  // Resolves the special tokens by spelling: FormatError when the tokenizer lacks one. The
  // tokenizer must outlive the template.
  explicit ChatTemplate(const Tokenizer& tokenizer);

  // InvalidRequest for conversations the format cannot express (an image in a system or
  // assistant message, an empty grid, text that spells the image placeholder).
  RenderedPrompt render(std::span<const ChatMessage> messages, const ChatOptions& options) const;
  // The same rendering as text, with one placeholder per image (for logs and for checking
  // against other implementations); encoding it and expanding the images gives render().ids.
  std::string render_text(std::span<const ChatMessage> messages, const ChatOptions& options) const;

  const SpecialTokenIds& special() const { return special_; }

 private:
  const Tokenizer& tokenizer_;
  SpecialTokenIds special_;
};

}  // namespace flashdesk
