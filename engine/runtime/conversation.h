// The one renderer of a conversation into the prompt a turn sends. ChatSession, the stored
// sessions of storage::PersistentChat and the desktop app's chat services all build their prompts
// here (Qt-free), so the prompt a user is shown as sent is the prompt that was tokenised.
//
// Goals: a conversation as it is kept (a system prompt, messages with their text, reasoning,
// sampled ids and images) becomes the ids to prefill, their image spans, the images in prompt
// order and the same prompt as text. Answers render from the ids they were sampled as, so a
// rendering repeats the KV of the turn that produced them (chat_template.h, prefix rule 2).
// Non-goals: storage (the callers read their messages), encoding images (ChatEngine).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/tokenizer/chat_template.h"
#include "engine/vision/image_input.h"

namespace flashdesk {

using ImageRef = std::shared_ptr<const PreparedImage>;

// A message as a session keeps it.
struct ConversationMessage {
  Role role = Role::kUser;  // kUser or kAssistant
  std::string text;
  std::string thinking;  // answers: the reasoning as shown
  // Answers: every id as sampled (reasoning, </think>, content, EOS; a stopped answer ends
  // early). Empty: the answer renders from its text.
  std::vector<TokenId> sampled_ids;
  std::vector<ImageRef> images;  // user messages: placed before the text
};

// A user message with its images.
ConversationMessage user_turn(std::string text, std::vector<ImageRef> images = {});

struct Conversation {
  std::string system_prompt;                  // empty: none
  std::vector<ConversationMessage> messages;  // the last one is the user message to answer
};

struct RenderedTurn {
  RenderedPrompt prompt;         // ids, image spans and the prompt as text
  std::vector<ImageRef> images;  // the images of prompt.images, in prompt order
};

// A user message of the chat format: the images first (as the demo data places them), then the
// text (left out when empty and there are images).
ChatMessage user_message(std::string text, std::span<const ImageRef> images);

// An answer of the chat format from what was sampled: the ids are split back into reasoning and
// content ids at </think> (a trailing EOS dropped: the template adds it); an answer stopped while
// reasoning (no </think>, no text, some thinking) is reasoning only.
ChatMessage answer_message(const ConversationMessage& answer, const SpecialTokenIds& special);

// Renders `conversation` for the next answer. InvalidRequest for what the format cannot express
// (chat_template.h).
RenderedTurn render_conversation(const ChatTemplate& chat_template,
                                 const Conversation& conversation, const ChatOptions& options);

// The "Reasoning Effort: ..." line of a rendered prompt's text, or empty when it has none.
std::string find_effort_line(const std::string& prompt_text);

}  // namespace flashdesk
