// Runs chat completions on the one engine: a FIFO queue in front of it and the live KV of the last
// few conversations kept, so a client that resends its whole history pays only for the new
// tokens.
//
// Goals: each request reuses the kept conversation whose live sequence shares the longest token
// prefix with its rendering (ChatSession's live reuse: extended, or cut back to where the history
// changed); answers the server wrote are rendered from the ids they were sampled as, so a resent
// history repeats their KV; usage reports prompt, cached and generated tokens; a stream whose
// client is gone stops generating. Non-goals: the SSD block store and the window pool of stored
// sessions (storage/), batching several requests in one step.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "app/server/chat_request.h"
#include "app/server/turn_queue.h"
#include "engine/runtime/chat_engine.h"

namespace flashdesk::server {

// A request with its images decoded for the model.
struct PreparedRequest {
  Conversation history;      // system prompt and the messages before the last
  ConversationMessage user;  // the message to answer
  TurnOptions turn;
  std::vector<std::string> stop;
};

struct CompletionUsage {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;      // prompt tokens whose KV was reused and not run again
  int64_t completion_tokens = 0;  // generated, reasoning included
  int64_t reasoning_tokens = 0;
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

class CompletionService {
 public:
  // Keeps the live KV of up to `kept_conversations` (>= 1) conversations.
  CompletionService(ChatEngine& engine, int kept_conversations);
  // The same, taking turns in `queue` with the engine's other users (the desktop app's chat
  // window), so their turns and the API's never run on the engine at once. `queue` outlives this.
  CompletionService(ChatEngine& engine, int kept_conversations, TurnQueue& queue);
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
  struct Slot;
  void make_slots(int kept_conversations);
  Slot& choose_slot(const std::vector<TokenId>& prompt);

  ChatEngine& engine_;
  std::string model_id_;
  std::unique_ptr<TurnQueue> own_queue_;  // when no queue is shared
  TurnQueue* queue_;
  std::vector<std::unique_ptr<Slot>> slots_;
  uint64_t clock_ = 0;  // counts turns, for least-recently-used
  std::atomic<bool> cancelled_{false};
};

}  // namespace flashdesk::server
