// The one interface between the desktop app's worker thread and a chat engine: load a model,
// open a stored session, render and run turns. The app talks only to this interface, so the
// persistent-session layer (SSD KV restore by bounded replay) slots in as another implementation.
//
// Goals: Qt-free, blocking calls made from one worker thread; errors are flashdesk::Error
// subclasses whose what() is shown to the user as is. Messages are persisted by exactly one side:
// the worker (SessionStore + TokenLog) unless stores_messages() says the service does it (the
// persistent service: its turns log tokens and spill KV blocks). Non-goals: threading (the
// worker owns the thread).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "app/server/http_server.h"
#include "engine/model/load_progress.h"
#include "engine/runtime/generator.h"
#include "engine/util/error.h"
#include "storage/session_types.h"

namespace flashdesk::ui {

struct ModelSummary {
  std::string name;  // a remote model: its id on the endpoint
  std::string fingerprint;
  std::filesystem::path directory;
  bool vision = false;      // the model has an image encoder
  bool draft_head = false;  // its DSpark draft head loaded (ChatEngine::has_draft_head)
  int64_t max_context = 0;  // tokens
  std::string backend;      // the compute backend it runs on ("cpu", ...; "remote")
  std::string remote_url;   // a remote model's endpoint (empty: a local model)
};

// ModelSummary::backend of a remote model.
inline constexpr const char* kRemoteBackend = "remote";

// A model served elsewhere over the OpenAI-compatible API (vLLM, SGLang, another FlashDesk).
struct RemoteEndpoint {
  std::string url;      // the API base, e.g. http://gpu-box:8000/v1
  std::string api_key;  // empty: none
  std::string model;    // an id the endpoint's /v1/models lists
};

// The local API server while it runs.
struct ServingInfo {
  std::string url;    // http://127.0.0.1:PORT/v1
  std::string model;  // the id clients name (/v1/models)
};

// One user turn as the app asks for it.
struct TurnRequest {
  int64_t session_id = 0;
  std::string text;
  std::vector<std::filesystem::path> images;  // files the user attached, in order
  storage::SessionSettings settings;          // effort, thinking, system prompt, sampling
  // DSpark speculative decoding (an app setting, docs/dspark.md); only for a model with a head.
  bool speculative = false;
};

// What a turn cost; the KV fields tell reuse from recomputation (docs/session-resume.md).
struct TurnStats {
  int64_t prompt_tokens = 0;
  int64_t reused_tokens = 0;    // prompt tokens whose KV was already live
  int64_t restored_tokens = 0;  // prompt tokens whose KV came back from SSD
  int64_t replayed_tokens = 0;  // cached tokens run again to rebuild windowed (SWA) KV
  int64_t computed_tokens = 0;  // prompt tokens run through the model now
  double restore_ms = 0.0;
  int64_t generated_tokens = 0;
  int64_t thinking_tokens = 0;
  double thinking_ms = 0.0;  // how long the reasoning took (GenerationStats::thinking_ms)
  double ttft_ms = 0.0;
  double decode_tokens_per_s = 0.0;
  bool speculative = false;    // the turn decoded with the DSpark head
  int64_t verifies = 0;        // target steps that verified drafts (GenerationStats::verifies)
  double mean_accepted = 0.0;  // accepted drafts per verify
};

struct TurnOutcome {
  std::string content;
  std::string reasoning;
  std::vector<TokenId> generated_ids;  // as sampled, </think> and EOS included
  FinishReason finish = FinishReason::kEos;
  TurnStats stats;
  // The prompt this turn tokenised, as text (RenderedPrompt::text): what the app shows as sent.
  std::string prompt_text;
  int64_t answer_message_id = 0;  // the stored answer, when the service stores the turn
  // The latest storage failure (disk full while spilling KV blocks or logging tokens): the turn
  // went on, the user should be told (storage::SessionTurn::storage_warning).
  std::optional<std::string> storage_warning;
};

// The sizes of the KV caches (issue: settings for the SSD budget, retention and window pool):
// what the app settings give storage::KvBlockStoreOptions and WindowPoolOptions.
struct CacheLimits {
  uint64_t ssd_budget_bytes = 0;
  std::chrono::milliseconds ssd_retention{0};
  uint64_t pool_budget_bytes = 0;  // 0: 10% of physical RAM
  std::chrono::milliseconds pool_ttl{0};
};

// What the KV caches hold now (SSD blocks, the DRAM window pool) and what the turns of this app
// run got from them; the cache panel shows it.
struct CacheStats {
  bool has_caches = false;  // false: the service keeps no SSD blocks (or no model is loaded)
  int64_t ssd_blocks = 0;
  int64_t ssd_bytes = 0;
  int64_t block_reads_hit = 0;  // since the model was loaded
  int64_t block_reads_missed = 0;
  int64_t block_writes_failed = 0;
  int64_t pool_entries = 0;
  uint64_t pool_bytes = 0;
  uint64_t pool_budget_bytes = 0;
  // Summed over this app run's turns (TurnStats), filled in by the worker.
  int64_t turns = 0;
  int64_t prompt_tokens = 0;
  int64_t restored_tokens = 0;  // from SSD blocks
  int64_t reused_tokens = 0;    // live KV or a parked window
};

class ChatService {
 public:
  virtual ~ChatService() = default;

  // Verifies and loads a model directory; throws Error subclasses naming the file and problem.
  // Open sessions are forgotten (their ids belong to the old model). `progress` (may be empty) is
  // called on this thread as the weights are uploaded, ending at done == total.
  virtual ModelSummary load_model(const std::filesystem::path& directory,
                                  const LoadProgressCallback& progress) = 0;
  // The compute backend (a backend_names() entry) and CPU threads (0: every core) of the next
  // load_model; the loaded model keeps its own until then.
  virtual void set_device(const std::string& backend, int threads) = 0;
  // Makes a model served elsewhere the model of the next turns (load_model's counterpart): the
  // endpoint is asked for its models and must list `endpoint.model`. A loaded local model is
  // unloaded. InvalidRequest / IoError naming the problem; by default no service has remote models.
  virtual ModelSummary connect_remote(const RemoteEndpoint& /*endpoint*/) {
    throw InvalidRequest("this chat service cannot use a remote model");
  }
  // Serves the loaded local model over the OpenAI-compatible API (docs/server.md) on the same
  // engine: the API's turns and the window's wait for each other in one queue. A running server
  // is stopped first. InvalidRequest when there is nothing to serve (no local model), IoError
  // when the address cannot be bound.
  virtual ServingInfo start_serving(const server::ServeOptions& /*options*/) {
    throw InvalidRequest("this chat service cannot serve its model");
  }
  // Stops the API server (no-op when none runs): no new connections, the API's answer in flight
  // ends after its current token. A model load stops it too.
  virtual void stop_serving() {}
  // Any thread: ends the API server's answer in flight after its current token (and every later
  // one), so a stop_serving queued behind it, or a window turn waiting for the engine, comes soon.
  virtual void interrupt_serving() {}
  // The KV cache sizes of the next load_model (a service without caches ignores them).
  virtual void set_cache_limits(const CacheLimits& /*limits*/) {}
  virtual std::optional<ModelSummary> model() const = 0;

  // Makes a stored session ready to continue: `history` is everything before the next turn.
  virtual void open_session(int64_t session_id, std::span<const storage::Message> history) = 0;
  virtual void forget_session(int64_t session_id) = 0;
  // Erases what the service keeps of a session (KV blocks, parked windows, and its rows when
  // stores_messages()); false when the caller must erase the session from the store itself.
  virtual bool erase_session(int64_t session_id) {
    forget_session(session_id);
    return false;
  }
  // True when send() stores the user message and the answer (token by token) itself.
  virtual bool stores_messages() const { return false; }
  // The caches' contents now (the run totals are the worker's); nothing for a live-KV service.
  virtual std::optional<CacheStats> cache_stats() { return std::nullopt; }

  // Throws InvalidRequest when the request cannot be run (no model, images the model cannot
  // read, an unreadable image file) before anything is generated or stored.
  virtual void check(const TurnRequest& request) const = 0;
  // The prompt the request would render now, as text (the preview before sending; the prompt a
  // turn actually sent comes back in TurnOutcome::prompt_text).
  virtual std::string render_prompt(const TurnRequest& request) const = 0;
  // Runs one turn of an opened session, streaming through `callbacks`; `stop` ends it early.
  virtual TurnOutcome send(const TurnRequest& request, const StreamCallbacks& callbacks,
                           const std::atomic<bool>* stop) = 0;
};

}  // namespace flashdesk::ui
