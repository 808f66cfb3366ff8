// One chat completion on the engine: the conversation rendered with the ids of the server's own
// answers, its prefix restored from the KV tiers, the answer generated with stop sequences applied,
// usage counted (completion_service.h).
#include "app/server/completion_service.h"

#include <chrono>
#include <cstdio>

#include "app/server/api_error.h"
#include "app/server/stop_matcher.h"
#include "engine/runtime/live_reuse.h"
#include "engine/util/error.h"
#include "storage/session_images.h"
#include "storage/session_types.h"

namespace flashdesk::server {

namespace {

Conversation with_user(const PreparedRequest& request) {
  Conversation c = request.history;
  c.messages.push_back(request.user);
  return c;
}

std::string finish_reason(FinishReason reason, bool stop_sequence) {
  if (stop_sequence) return "stop";
  return reason == FinishReason::kLength || reason == FinishReason::kContextFull ? "length"
                                                                                 : "stop";
}

// Cached = reused and not run again (a restore's replayed tail runs again); where it came from.
CompletionUsage usage_of(const GenerationStats& s, const storage::PlannedPrefill& plan) {
  return {.prompt_tokens = s.prompt_tokens,
          .cached_tokens = s.reused_tokens - s.replayed_tokens,
          .completion_tokens = s.generated_tokens,
          .reasoning_tokens = s.thinking_tokens,
          .from_ssd = plan.reused_ssd,
          .from_pool = plan.reused_pool};
}

}  // namespace

CompletionService::CompletionService(ChatEngine& engine, CompletionServiceOptions options)
    : engine_(engine),
      model_id_(engine.name()),
      own_queue_(std::make_unique<TurnQueue>()),
      queue_(own_queue_.get()),
      cache_(engine, options.kept_conversations, options.tiers),
      answers_(engine.fingerprint(), options.answers_dir) {}

CompletionService::CompletionService(ChatEngine& engine, CompletionServiceOptions options,
                                     TurnQueue& queue)
    : engine_(engine),
      model_id_(engine.name()),
      queue_(&queue),
      cache_(engine, options.kept_conversations, options.tiers),
      answers_(engine.fingerprint(), options.answers_dir) {}

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
      p.image_digests.push_back(storage::image_digest(image.bytes));
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

// Generates the answer from the restored prefix: the images in the prefill (replay included)
// encoded, the prompt marked at its <think> in thinking mode.
GenerationResult CompletionService::generate(const PreparedRequest& request,
                                             const RenderedTurn& rendered,
                                             storage::PlannedPrefill& plan,
                                             const StreamCallbacks& callbacks,
                                             const std::atomic<bool>* stop) {
  GenerationOptions gen = request.turn.generation;
  gen.starts_in_thinking = request.turn.mode == ThinkingMode::kThinking;
  gen.prefill.replay = plan.replay;
  gen.prefill.mark_at =
      thinking_mark(request.turn.mode, static_cast<int64_t>(rendered.prompt.ids.size()));
  const auto first = static_cast<size_t>(plan.first_prefill_index());
  const std::vector<ImageEmbedding> embeddings =
      engine_.embed_images(rendered.prompt.images, rendered.images, first);
  gen.prefill.images = embeddings;
  const auto suffix = std::span<const TokenId>(rendered.prompt.ids).subspan(first);
  try {
    return engine_.generator().generate(plan.state, suffix, gen, callbacks, stop);
  } catch (const InvalidRequest& e) {
    throw ApiError::invalid(e.what(), "messages");
  }
}

Completion CompletionService::complete(const PreparedRequest& request, const TextSink& sink) {
  Conversation conversation = with_user(request);
  conversation.messages = answers_.with_sampled_ids(std::move(conversation.messages));
  const RenderedTurn rendered =
      render_conversation(engine_.chat_template(), conversation,
                          ChatOptions{.mode = request.turn.mode, .effort = request.turn.effort});
  std::vector<storage::ImageSpan> images =
      storage::prompt_image_spans(rendered.prompt.images, request.image_digests);

  Completion out;
  out.thinking = request.turn.mode == ThinkingMode::kThinking;
  std::atomic<bool> stop{false};
  StopMatcher matcher(request.stop);
  const auto pass = [&](StreamChannel channel, std::string_view text) {
    if (text.empty() || out.cancelled) return;
    if (channel == StreamChannel::kAnswer) out.content.append(text);
    if (sink && !sink(channel, text)) out.cancelled = true, stop = true;
  };
  std::vector<TokenId> sampled;
  StreamCallbacks callbacks;
  callbacks.on_text = [&](StreamChannel channel, std::string_view text) {
    if (channel == StreamChannel::kThinking) return pass(channel, text);
    pass(channel, matcher.feed(text));
    if (matcher.stopped()) stop = true;
  };
  callbacks.on_token = [&](TokenId id) {
    sampled.push_back(id);
    if (cancelled_) stop = true;
  };
  // A failed turn drops the lease: its state may be half-updated, the slot starts empty.
  ConversationCache::Lease lease = cache_.restore(rendered.prompt.ids, images);
  const GenerationResult result = generate(request, rendered, lease.plan, callbacks, &stop);
  out.usage = usage_of(result.stats, lease.plan);
  cache_.keep(std::move(lease), std::move(images));
  answers_.remember(result.content, std::move(sampled));
  pass(StreamChannel::kAnswer, matcher.flush());
  out.reasoning = result.reasoning;
  out.finish_reason = finish_reason(result.finish, matcher.stopped());
  return out;
}

}  // namespace flashdesk::server
