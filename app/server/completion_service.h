// Runs chat completions on the one engine: a FIFO queue in front of it, and the conversations' KV
// in the live slots, the window pool and the SSD blocks (conversation_cache.h), so a client that
// resends its whole history pays only for the new tokens, also after its live KV was evicted or
// the server restarted.
//
// Goals: each request's rendering restored from the cheapest cached prefix (the stored sessions'
// planner); answers the server wrote are rendered from the ids they were sampled as
// (sampled_answers.h), so a resent history repeats their KV; usage reports prompt, cached and
// generated tokens; a stream whose client is gone stops generating. Non-goals: batching several
// requests in one step.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "app/server/chat_request.h"
#include "app/server/conversation_cache.h"
#include "app/server/sampled_answers.h"
#include "app/server/turn_queue.h"
#include "engine/runtime/chat_engine.h"
#include "storage/kv_block_key.h"

namespace flashdesk::server {

// A request with its images decoded for the model.
struct PreparedRequest {
  Conversation history;      // system prompt and the messages before the last
  ConversationMessage user;  // the message to answer
  TurnOptions turn;
  std::vector<std::string> stop;
  std::vector<storage::ImageDigest> image_digests;  // of every image, in prompt order
};

struct CompletionUsage {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;      // prompt tokens whose KV was reused and not run again
  int64_t completion_tokens = 0;  // generated, reasoning included
  int64_t reasoning_tokens = 0;
  // Of the reused prompt tokens: restored from SSD blocks, and from a parked window (the rest
  // was live).
  int64_t from_ssd = 0;
  int64_t from_pool = 0;
};

struct Completion {
  std::string content;
  std::string reasoning;
  bool thinking = false;      // thinking mode: reasoning_content is returned
  std::string finish_reason;  // "stop" or "length"
  bool cancelled = false;     // the client went away; nothing more is sent
  CompletionUsage usage;
};

// Receives streamed text on its channel; returns false when the client is gone (stops the turn).
using TextSink = std::function<bool(StreamChannel, std::string_view)>;

struct CompletionServiceOptions {
  int kept_conversations = 2;  // live slots (>= 1)
  KvTiers tiers;               // the window pool and the SSD blocks; none: live slots only
  // Where the ids of the server's answers are kept across restarts (sampled_answers.h); empty:
  // in memory only.
  std::filesystem::path answers_dir;
};

class CompletionService {
 public:
  // The stores in `options.tiers` outlive this service.
  CompletionService(ChatEngine& engine, CompletionServiceOptions options);
  // The same, taking turns in `queue` with the engine's other users (the desktop app's chat
  // window), so their turns and the API's never run on the engine at once. `queue` outlives this.
  CompletionService(ChatEngine& engine, CompletionServiceOptions options, TurnQueue& queue);
  ~CompletionService();

  // The id clients name the model by (/v1/models).
  const std::string& model_id() const { return model_id_; }

  // Decodes the request's images; runs on the request's thread. ApiError for a bad image.
  PreparedRequest prepare(const ChatRequest& request) const;
  // Waits for the engine; the returned turn holds it until destroyed.
  std::unique_ptr<TurnQueue::Turn> wait_turn() { return queue_->wait(); }
  // With the turn held: ApiError when the conversation cannot be rendered or does not fit the
  // context, so a stream can be refused before its headers are sent.
  void check(const PreparedRequest& request) const;
  // With the turn held: answers the request, streaming to `sink` when given.
  Completion complete(const PreparedRequest& request, const TextSink& sink);

  int64_t waiting() const { return queue_->waiting(); }
  // Ends the generation in flight after its current token, and every later one at its first
  // (the server is stopping). Any thread.
  void cancel_all() { cancelled_ = true; }

 private:
  GenerationResult generate(const PreparedRequest& request, const RenderedTurn& rendered,
                            storage::PlannedPrefill& plan, const StreamCallbacks& callbacks,
                            const std::atomic<bool>* stop);

  ChatEngine& engine_;
  std::string model_id_;
  std::unique_ptr<TurnQueue> own_queue_;  // when no queue is shared
  TurnQueue* queue_;
  ConversationCache cache_;
  SampledAnswers answers_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace flashdesk::server
