// Conversations as sessions keep them, rendered to prompts (see conversation.h).
#include "engine/runtime/conversation.h"

#include <algorithm>

#include "engine/tokenizer/reasoning_effort.h"

namespace flashdesk {

ChatMessage user_message(std::string text, std::span<const ImageRef> images) {
  std::vector<ContentPart> parts;
  for (const ImageRef& img : images) parts.push_back(ContentPart::of_image(img->pixels.grid));
  if (!text.empty() || images.empty()) parts.push_back(ContentPart::of_text(std::move(text)));
  return ChatMessage::of_parts(Role::kUser, std::move(parts));
}

ConversationMessage user_turn(std::string text, std::vector<ImageRef> images) {
  ConversationMessage m;
  m.role = Role::kUser;
  m.text = std::move(text);
  m.images = std::move(images);
  return m;
}

ChatMessage answer_message(const ConversationMessage& answer, const SpecialTokenIds& special) {
  ChatMessage out = ChatMessage::assistant(answer.text, answer.thinking);
  const std::vector<TokenId>& ids = answer.sampled_ids;
  if (ids.empty()) return out;
  auto end = ids.end();
  if (ids.back() == special.eos) --end;
  const auto think_end = std::find(ids.begin(), end, special.think_end);
  if (think_end != end) {
    out.reasoning_ids = std::vector<TokenId>(ids.begin(), think_end);
    out.content_ids = std::vector<TokenId>(think_end + 1, end);
  } else if (answer.text.empty() && !answer.thinking.empty()) {  // stopped while reasoning
    out.reasoning_ids = std::vector<TokenId>(ids.begin(), end);
    out.content_ids = std::vector<TokenId>{};
  } else {
    out.content_ids = std::vector<TokenId>(ids.begin(), end);
  }
  return out;
}

RenderedTurn render_conversation(const ChatTemplate& chat_template,
                                 const Conversation& conversation, const ChatOptions& options) {
  RenderedTurn out;
  std::vector<ChatMessage> messages;
  if (!conversation.system_prompt.empty())
    messages.push_back(ChatMessage::system(conversation.system_prompt));
  for (const ConversationMessage& m : conversation.messages) {
    if (m.role == Role::kUser) {
      messages.push_back(user_message(m.text, m.images));
      out.images.insert(out.images.end(), m.images.begin(), m.images.end());
    } else {
      messages.push_back(answer_message(m, chat_template.special()));
    }
  }
  out.prompt = chat_template.render(messages, options);
  return out;
}

std::string find_effort_line(const std::string& prompt_text) {
  const std::string key = "Reasoning Effort:";
  const size_t begin = prompt_text.find(key);
  if (begin == std::string::npos) return {};
  const size_t end = prompt_text.find('\n', begin);
  return prompt_text.substr(begin, end == std::string::npos ? end : end - begin);
}

}  // namespace flashdesk
