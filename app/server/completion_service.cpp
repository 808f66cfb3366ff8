// One chat completion on the engine: the kept conversation chosen by shared prefix, the turn run
// through ChatSession, stop sequences applied to the answer, usage counted (completion_service.h).
#include "app/server/completion_service.h"

#include <chrono>
#include <cstdio>

#include "app/server/api_error.h"
#include "app/server/stop_matcher.h"
#include "engine/util/error.h"

namespace flashdesk::server {

struct CompletionService::Slot {
  std::unique_ptr<ChatSession> session;
  std::vector<TokenId> tokens;  // the last prompt and its sampled answer: what the live KV holds
  uint64_t last_used = 0;
};

namespace {

Conversation with_user(const PreparedRequest& request) {
  Conversation c = request.history;
  c.messages.push_back(request.user);
  return c;
}

// Answers this server wrote carry the ids they were sampled as; a resent answer with the same
// text gets them back, so its rendering repeats the KV already computed (chat_template.h, rule 2).
std::vector<ConversationMessage> with_sampled_ids(std::vector<ConversationMessage> messages,
                                                  const std::vector<ConversationMessage>& kept) {
  for (size_t i = 0; i < messages.size() && i < kept.size(); ++i)
    if (messages[i].role == Role::kAssistant && kept[i].role == Role::kAssistant &&
        messages[i].text == kept[i].text) {
      messages[i].sampled_ids = kept[i].sampled_ids;
      messages[i].thinking = kept[i].thinking;
    }
  return messages;
}

std::string finish_reason(FinishReason reason, bool stop_sequence) {
  if (stop_sequence) return "stop";
  return reason == FinishReason::kLength || reason == FinishReason::kContextFull ? "length"
                                                                                 : "stop";
}

CompletionUsage usage_of(const GenerationStats& s) {
  return {.prompt_tokens = s.prompt_tokens,
          .cached_tokens = s.reused_tokens - s.replayed_tokens,
          .completion_tokens = s.generated_tokens,
          .reasoning_tokens = s.thinking_tokens};
}

}  // namespace

CompletionService::CompletionService(ChatEngine& engine, int kept_conversations)
    : engine_(engine),
      model_id_(engine.name()),
      own_queue_(std::make_unique<TurnQueue>()),
      queue_(own_queue_.get()) {
  make_slots(kept_conversations);
}

CompletionService::CompletionService(ChatEngine& engine, int kept_conversations, TurnQueue& queue)
    : engine_(engine), model_id_(engine.name()), queue_(&queue) {
  make_slots(kept_conversations);
}

void CompletionService::make_slots(int kept_conversations) {
  if (kept_conversations < 1) throw InvalidRequest("at least one conversation must be kept");
  for (int i = 0; i < kept_conversations; ++i) {
    slots_.push_back(std::make_unique<Slot>());
    slots_.back()->session = std::make_unique<ChatSession>(engine_);
  }
}

CompletionService::~CompletionService() = default;

PreparedRequest CompletionService::prepare(const ChatRequest& request) const {
  PreparedRequest p;
  p.history.system_prompt = request.system_prompt;
  p.turn = request.turn;
  p.stop = request.stop;
  for (const RequestMessage& m : request.messages) {
    ConversationMessage c;
    c.role = m.role;
    c.text = m.text;
    for (const RequestImage& image : m.images) {
      try {
        c.images.push_back(engine_.prepare_image_bytes(image.bytes, image.label));
      } catch (const Error& e) {
        throw ApiError::invalid(e.what(), image.label, "invalid_image");
      }
    }
    p.history.messages.push_back(std::move(c));
  }
  p.user = std::move(p.history.messages.back());
  p.history.messages.pop_back();
  return p;
}

void CompletionService::check(const PreparedRequest& request) const {
  RenderedTurn rendered;
  try {
    rendered =
        render_conversation(engine_.chat_template(), with_user(request),
                            ChatOptions{.mode = request.turn.mode, .effort = request.turn.effort});
  } catch (const Error& e) {
    throw ApiError::invalid(e.what(), "messages");
  }
  const auto prompt = static_cast<int64_t>(rendered.prompt.ids.size());
  const int64_t limit = engine_.model().max_context();
  if (prompt + 1 > limit)
    throw ApiError::invalid("the conversation is " + std::to_string(prompt) +
                                " tokens; this model's context holds " + std::to_string(limit),
                            "messages", "context_length_exceeded");
}

// The slot whose live tokens share the longest prefix with `prompt`; else the least recently
// used one.
CompletionService::Slot& CompletionService::choose_slot(const std::vector<TokenId>& prompt) {
  Slot* best = slots_.front().get();
  size_t best_common = 0;
  for (const auto& slot : slots_) {
    const size_t common = common_prefix(slot->tokens, prompt);
    if (common > best_common || (common == best_common && slot->last_used < best->last_used)) {
      best = slot.get();
      best_common = common;
    }
  }
  return *best;
}

Completion CompletionService::complete(const PreparedRequest& request, const TextSink& sink) {
  const RenderedTurn plain =
      render_conversation(engine_.chat_template(), with_user(request),
                          ChatOptions{.mode = request.turn.mode, .effort = request.turn.effort});
  Slot& slot = choose_slot(plain.prompt.ids);
  slot.last_used = ++clock_;
  ChatSession& session = *slot.session;
  session.set_system_prompt(request.history.system_prompt);
  session.set_messages(with_sampled_ids(request.history.messages, session.messages()));

  Completion out;
  out.thinking = request.turn.mode == ThinkingMode::kThinking;
  std::atomic<bool> stop{false};
  StopMatcher matcher(request.stop);
  const auto pass = [&](StreamChannel channel, std::string_view text) {
    if (text.empty() || out.cancelled) return;
    if (channel == StreamChannel::kAnswer) out.content.append(text);
    if (sink && !sink(channel, text)) out.cancelled = true, stop = true;
  };
  StreamCallbacks callbacks;
  callbacks.on_text = [&](StreamChannel channel, std::string_view text) {
    if (channel == StreamChannel::kThinking) return pass(channel, text);
    pass(channel, matcher.feed(text));
    if (matcher.stopped()) stop = true;
  };
  callbacks.on_token = [&](TokenId) {
    if (cancelled_) stop = true;
  };
  TurnResult turn;
  try {
    turn = session.send(request.user, request.turn, callbacks, &stop);
  } catch (const InvalidRequest& e) {
    slot.tokens.clear();
    throw ApiError::invalid(e.what(), "messages");
  } catch (...) {
    slot.tokens.clear();
    throw;
  }
  pass(StreamChannel::kAnswer, matcher.flush());
  slot.tokens = turn.prompt_ids;
  const std::vector<TokenId>& sampled = session.messages().back().sampled_ids;
  slot.tokens.insert(slot.tokens.end(), sampled.begin(), sampled.end());
  out.reasoning = turn.generation.reasoning;
  out.finish_reason = finish_reason(turn.generation.finish, matcher.stopped());
  out.usage = usage_of(turn.generation.stats);
  return out;
}

}  // namespace flashdesk::server
