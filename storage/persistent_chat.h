// PersistentChat: chat sessions that survive a restart, for the CLI and the desktop app. It owns
// the data folder's stores (SessionStore, TokenLog, KvBlockStore, WindowPool) and one live
// sequence; each turn renders the stored conversation, restores the longest cached prefix (live
// KV, SSD blocks + encoder bounded replay, window pool: prefix_planner.h), generates with
// streaming, logs every token as it is produced (group commits), and afterwards parks the window
// in the pool and spills the completed global-KV blocks to the SSD in the background.
// Images: a user turn may carry image files (models with a vision tower). Each is read once,
// stored as an attachment of the user message (once per digest) and rendered from the store in
// later turns and after a restart; the prompt's image spans (placeholder range + digest) enter
// the block keys, the pool's prefix digests and the live-KV match, so an image-bearing prefix is
// restored like any other and a different picture at the same place never matches. Images whose
// span reaches into the prefill (bounded replay included) are encoded again by the vision tower.
// An engine without vision continues such a session on the messages' text.
//
// Usage:
//   PersistentChat chat(engine, {.layout = StorageLayout::in(dir)});
//   const int64_t id = chat.create_session("title", settings_from(turn_options, system));
//   auto turn = chat.send("Hello", turn_options, callbacks, &stop);   // in the open session
//   chat.send("What is this?", std::vector<std::filesystem::path>{"cat.png"}, turn_options);
//   turn.generation.stats: reused_{ram,ssd,pool}_tokens, replayed_tokens, computed_tokens...
//   chat.open_session(other_id);   // parks the current window, continues another session
// Not thread-safe: one turn at a time (stop may be set from another thread).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/runtime/chat_engine.h"
#include "storage/kv_block_store.h"
#include "storage/prefix_planner.h"
#include "storage/session_images.h"
#include "storage/session_store.h"
#include "storage/token_log.h"
#include "storage/window_pool.h"

namespace flashdesk::storage {

struct PersistentChatOptions {
  StorageLayout layout;  // StorageLayout::from_environment() or ::in(dir)
  KvBlockStoreOptions blocks{};
  WindowPoolOptions window_pool{};
  bool spill = true;    // write global-KV blocks to the SSD after each turn
  bool use_ssd = true;  // restore from SSD blocks (off: live KV and the pool only)
  bool use_window_pool = true;
};

struct SessionTurn {
  TurnResult turn;  // the answer, prompt ids and stats (restore counts included)
  int64_t user_message_id = 0;
  int64_t answer_message_id = 0;
  MessageStatus status = MessageStatus::complete;  // interrupted when stopped or failed
  int64_t corrupt_blocks = 0;          // SSD blocks that failed verification (deleted, recomputed)
  int64_t blocks_queued = 0;           // global-KV blocks queued for writing after the turn
  std::vector<ImageSpan> image_spans;  // the prompt's images: placeholder ranges and digests
  // The latest storage failure (disk full while spilling blocks or committing tokens): chat goes
  // on, the user should be told. Block writes are asynchronous, so a failure of this turn's
  // spill shows in the next turn (or after flush()).
  std::optional<std::string> storage_warning;
};

class PersistentChat {
 public:
  // Opens (creates, migrates) the stores. The first process on a data folder owns it (an
  // InstanceLock) and repairs at open: crashed answers become interrupted messages, orphaned
  // files go. `engine` must outlive this object.
  PersistentChat(ChatEngine& engine, PersistentChatOptions options);
  ~PersistentChat();  // finishes queued token commits and block writes
  PersistentChat(const PersistentChat&) = delete;
  PersistentChat& operator=(const PersistentChat&) = delete;

  // A session settings record for this engine's model with the given turn options.
  SessionSettings settings_for(const TurnOptions& options, std::string system_prompt = {}) const;
  // Creates a session and opens it. Returns its id.
  int64_t create_session(std::string title, const SessionSettings& settings);
  // Makes `id` the session that send() continues; the previous one's window is parked.
  void open_session(int64_t id);
  std::optional<int64_t> session_id() const { return session_id_; }
  std::vector<SessionInfo> list_sessions() { return store_->list_sessions(); }
  std::vector<Message> messages();  // of the open session
  // Erases the session (rows, its own blocks and files: SessionStore::delete_session) and its
  // parked windows; when it is the open one, no session is open afterwards.
  EraseReport delete_session(int64_t id);

  // Appends the user message, runs the turn and stores the answer. Throws InvalidRequest
  // without an open session; engine errors propagate (the answer is then stored interrupted).
  SessionTurn send(std::string user_text, const TurnOptions& options,
                   const StreamCallbacks& callbacks = {}, const std::atomic<bool>* stop = nullptr);
  // The same with image files attached to the user message (placed before its text). Every file
  // is read and prepared before anything is stored: IoError, FormatError (not an image, too
  // large) or InvalidRequest (the engine cannot read images) leave the session unchanged. A
  // stored attachment whose file has gone fails the turn with IoError.
  SessionTurn send(std::string user_text, std::span<const std::filesystem::path> image_files,
                   const TurnOptions& options, const StreamCallbacks& callbacks = {},
                   const std::atomic<bool>* stop = nullptr);

  // The prompt a send() of `user_text` with `image_files` in the open session would render now
  // (the desktop app's preview); nothing is stored. The images are read and prepared as for a
  // turn (stored ones once per open session).
  RenderedTurn render_next(std::string user_text,
                           std::span<const std::filesystem::path> image_files,
                           const TurnOptions& options);

  // Waits for queued block writes and token commits (tests, benchmarks, before exit).
  void flush();
  // As in SessionTurn: the token log's current error, or a block write failure not told yet.
  std::optional<std::string> storage_warning();
  // Drops the live KV (the next turn restores from the pool or the SSD).
  void drop_live_kv();
  int64_t live_tokens() const { return live_ ? live_->position() : 0; }
  const SequenceState* live_state() const { return live_ ? &*live_ : nullptr; }  // tests

  SessionStore& store() { return *store_; }
  KvBlockStore& blocks() { return *blocks_; }
  WindowPool& window_pool() { return *pool_; }
  ChatEngine& engine() { return engine_; }
  bool owns_data_folder() const { return lock_.has_value(); }

 private:
  // The stored conversation, ready for the engine, and its images' digests in prompt order.
  struct StoredConversation {
    Conversation conversation;
    std::vector<ImageDigest> digests;
  };
  // A turn before anything is stored: the new message's images read and prepared, the whole
  // conversation rendered.
  struct PreparedTurn {
    std::vector<UserImage> new_images;
    RenderedTurn rendered;
    std::vector<ImageSpan> image_spans;  // rendered.prompt.images with their digests
  };
  StoredConversation stored_conversation(const SessionInfo& info);
  ImageRef stored_image(const Attachment& attachment);
  PreparedTurn prepare_turn(int64_t session, std::string user_text,
                            std::span<const std::filesystem::path> image_files,
                            const TurnOptions& options);
  int64_t store_user_message(int64_t session, std::string text, std::vector<UserImage>& images);
  PlannedPrefill restore_prefix(int64_t session, const PreparedTurn& turn);
  StreamCallbacks logged_callbacks(const AnswerHandle& answer, const StreamCallbacks& callbacks);
  GenerationResult generate_logged(int64_t session, PlannedPrefill& plan, const PreparedTurn& turn,
                                   const TurnOptions& options, const StreamCallbacks& callbacks,
                                   const std::atomic<bool>* stop, SessionTurn& out);
  void forget_live();
  void park_window();
  void spill_after_turn(SessionTurn& out);

  ChatEngine& engine_;
  PersistentChatOptions options_;
  std::optional<InstanceLock> lock_;
  std::unique_ptr<SessionStore> store_;
  std::unique_ptr<KvBlockStore> blocks_;
  std::unique_ptr<TokenLog> token_log_;
  std::unique_ptr<WindowPool> pool_;
  std::optional<int64_t> session_id_;
  std::optional<SequenceState> live_;
  std::vector<ImageSpan> live_images_;  // the images inside live_'s tokens
  int64_t live_spilled_ = 0;            // tokens of live_ whose blocks are written or queued
  // The open session's images, prepared once (keyed by digest; cleared when another opens).
  std::unordered_map<ImageDigest, ImageRef, Digest128Hash> prepared_images_;
  int64_t reported_write_failures_ = 0;
};

}  // namespace flashdesk::storage
