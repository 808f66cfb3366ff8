// Turns of persistent chat sessions: render, restore the cached prefix, generate with the token
// log, spill the new global-KV blocks.
#include "storage/persistent_chat.h"

#include <algorithm>
#include <cmath>

#include "engine/model/sequence_cut.h"
#include "engine/runtime/live_reuse.h"
#include "engine/util/error.h"
#include "storage/kv_spill.h"
#include "storage/window_snapshot.h"

namespace flashdesk::storage {
namespace {

// Where the reused prefix came from and what restoring it cost (the generator counts it as live).
void add_restore_stats(const PlannedPrefill& plan, GenerationStats& s) {
  s.reused_ram_tokens = plan.reused_ram;
  s.reused_ssd_tokens = plan.reused_ssd;
  s.reused_pool_tokens = plan.reused_pool;
  s.bytes_read = plan.bytes_read;
  s.plan_ms = plan.plan_ms;
  s.read_ms = plan.read_ms;
  s.load_ms = plan.load_ms;
  s.ttft_ms += plan.plan_ms + plan.read_ms + plan.load_ms;
}

// How the answer ended, for the store: a restart shows "Thought for X s" and "stopped" from it.
AnswerEnd answer_end(const GenerationResult& result, bool stopped) {
  AnswerEnd end;
  if (result.stats.thinking_ms > 0.0 || !result.reasoning_ids.empty())
    end.thinking_ms = std::llround(result.stats.thinking_ms);
  end.stopped = stopped;
  return end;
}

}  // namespace
PersistentChat::PersistentChat(ChatEngine& engine, PersistentChatOptions options)
    : engine_(engine), options_(std::move(options)) {
  options_.layout.create_directories();
  lock_ = InstanceLock::try_acquire(options_.layout.lock_file());
  const bool owner = lock_.has_value();
  store_ = std::make_unique<SessionStore>(options_.layout, SessionStoreOptions{.repair = owner});
  KvBlockStoreOptions block_options = options_.blocks;
  block_options.repair = owner;
  blocks_ = std::make_unique<KvBlockStore>(options_.layout, block_options);
  token_log_ = std::make_unique<TokenLog>(options_.layout.database());
  pool_ = std::make_unique<WindowPool>(options_.window_pool);
}

PersistentChat::~PersistentChat() = default;

SessionSettings PersistentChat::settings_for(const TurnOptions& options,
                                             std::string system_prompt) const {
  SessionSettings s;
  s.model_fingerprint = engine_.fingerprint();
  s.effort = options.effort.value();
  s.thinking = options.mode == ThinkingMode::kThinking;
  s.system_prompt = std::move(system_prompt);
  s.sampling = options.generation.sampling;
  s.max_new_tokens = options.generation.max_new_tokens;
  return s;
}

int64_t PersistentChat::create_session(std::string title, const SessionSettings& settings) {
  const int64_t id = store_->create_session(title, settings);
  open_session(id);
  return id;
}

void PersistentChat::open_session(int64_t id) {
  store_->session(id);  // throws InvalidRequest when there is none
  if (session_id_ == id) return;
  park_window();
  forget_live();
  prepared_images_.clear();
  session_id_ = id;
}

std::vector<Message> PersistentChat::messages() {
  if (!session_id_) throw InvalidRequest("no session is open");
  return store_->messages(*session_id_);
}

EraseReport PersistentChat::delete_session(int64_t id) {
  if (session_id_ == id) {
    forget_live();
    prepared_images_.clear();
    session_id_.reset();
  }
  blocks_->flush();  // queued blocks of the session are indexed before the erase looks for them
  pool_->drop_session(id);
  return store_->delete_session(id);
}

void PersistentChat::drop_live_kv() {
  park_window();
  forget_live();
}

void PersistentChat::forget_live() {
  live_.reset();
  live_images_.clear();
  live_spilled_ = 0;
}

void PersistentChat::flush() {
  blocks_->flush();
  token_log_->flush();
}

std::optional<std::string> PersistentChat::storage_warning() {
  if (auto e = token_log_->last_error()) return "saving the answer: " + *e;
  const KvStoreStats kv = blocks_->stats();
  if (kv.writes_failed > reported_write_failures_ && kv.last_write_error) {
    reported_write_failures_ = kv.writes_failed;  // each failure is told once
    return "writing the KV cache: " + *kv.last_write_error;
  }
  return std::nullopt;
}

// The session's system prompt and stored messages, each user message with its images, each
// answer with the ids it was sampled as. An engine that cannot read images renders the stored
// messages' text only (the session stays usable with it).
PersistentChat::StoredConversation PersistentChat::stored_conversation(const SessionInfo& info) {
  StoredConversation out;
  out.conversation.system_prompt = info.settings.system_prompt;
  for (const Message& m : store_->messages(info.id)) {
    ConversationMessage c;
    c.role = m.role == Role::user ? flashdesk::Role::kUser : flashdesk::Role::kAssistant;
    c.text = m.text;
    if (m.role == Role::user && engine_.has_vision()) {
      for (const Attachment& a : m.attachments) {
        c.images.push_back(stored_image(a));
        out.digests.push_back(a.digest);
      }
    } else if (m.role != Role::user) {
      c.thinking = m.thinking;
      c.sampled_ids = m.token_ids;
    }
    out.conversation.messages.push_back(std::move(c));
  }
  return out;
}

// A stored attachment prepared for the engine: decoded from its file once per open session.
ImageRef PersistentChat::stored_image(const Attachment& attachment) {
  auto it = prepared_images_.find(attachment.digest);
  if (it != prepared_images_.end()) return it->second;
  ImageRef image = engine_.prepare_image(attachment.path);
  prepared_images_.emplace(attachment.digest, image);
  return image;
}

// Parks the live sequence's window rings (and its global KV past the last full block) so that
// returning to this session skips the encoder replay. The blocks below are on the SSD.
void PersistentChat::park_window() {
  if (!live_ || !session_id_ || !options_.use_window_pool || live_->position() == 0) return;
  const int64_t B = blocks_->tokens_per_block();
  const int64_t T = live_->position();
  const WindowKey key{*session_id_, T,
                      prefix_digest(engine_.fingerprint(), live_->tokens, live_images_, B)};
  pool_->park(key, encode_window_snapshot(engine_.backend(), *live_, T / B * B));
}

void PersistentChat::spill_after_turn(SessionTurn& out) {
  if (!options_.spill || !live_) return;
  SpillResult r = spill_blocks(*blocks_, engine_.backend(), *live_, engine_.fingerprint(),
                               session_id_, live_spilled_, live_images_);
  live_spilled_ = r.spilled_tokens;
  out.blocks_queued = r.queued_blocks;
}

SessionTurn PersistentChat::send(std::string user_text, const TurnOptions& options,
                                 const StreamCallbacks& callbacks, const std::atomic<bool>* stop) {
  return send(std::move(user_text), std::span<const std::filesystem::path>{}, options, callbacks,
              stop);
}

RenderedTurn PersistentChat::render_next(std::string user_text,
                                         std::span<const std::filesystem::path> image_files,
                                         const TurnOptions& options) {
  if (!session_id_) throw InvalidRequest("no session is open");
  return prepare_turn(*session_id_, std::move(user_text), image_files, options).rendered;
}

// Reads the new images and renders the stored conversation with the new message, before anything
// is stored: a file or a stored image that cannot be read fails the turn with the session
// unchanged.
PersistentChat::PreparedTurn PersistentChat::prepare_turn(
    int64_t session, std::string user_text, std::span<const std::filesystem::path> image_files,
    const TurnOptions& options) {
  PreparedTurn turn;
  for (const std::filesystem::path& file : image_files)
    turn.new_images.push_back(read_user_image(engine_, file));
  StoredConversation stored = stored_conversation(store_->session(session));
  ConversationMessage user = user_turn(std::move(user_text));
  for (const UserImage& image : turn.new_images) {
    user.images.push_back(image.prepared);
    stored.digests.push_back(image.digest);
  }
  stored.conversation.messages.push_back(std::move(user));
  turn.rendered = render_conversation(engine_.chat_template(), stored.conversation,
                                      ChatOptions{.mode = options.mode, .effort = options.effort});
  turn.image_spans = prompt_image_spans(turn.rendered.prompt.images, stored.digests);
  return turn;
}

int64_t PersistentChat::store_user_message(int64_t session, std::string text,
                                           std::vector<UserImage>& images) {
  NewMessage user;
  user.role = Role::user;
  user.text = std::move(text);
  for (UserImage& image : images) {
    prepared_images_.emplace(image.digest, image.prepared);
    user.images.push_back(std::move(image.stored));
  }
  return store_->append_message(session, user);
}

// The cheapest cached prefix (live KV, SSD blocks, window pool) in a state the prefill continues.
// Blocks below the reused live prefix stay spilled.
PlannedPrefill PersistentChat::restore_prefix(int64_t session, const PreparedTurn& turn) {
  const PrefixSources sources{engine_.model(), engine_.fingerprint(),
                              options_.use_ssd ? blocks_.get() : nullptr,
                              options_.use_window_pool ? pool_.get() : nullptr, session};
  const int64_t spilled_before = live_spilled_;
  PlannedPrefill plan = plan_prefill(sources, std::move(live_), turn.rendered.prompt.ids,
                                     turn.image_spans, live_images_);
  forget_live();
  const int64_t B = blocks_->tokens_per_block();
  live_spilled_ =
      std::max(plan.reused_ram > 0 ? std::min(spilled_before, plan.reused_ram / B * B) : int64_t{0},
               plan.reused_ssd);
  return plan;
}

// `callbacks` with every sampled id and piece of text appended to the answer's token log first.
StreamCallbacks PersistentChat::logged_callbacks(const AnswerHandle& answer,
                                                 const StreamCallbacks& callbacks) {
  StreamCallbacks logged;
  logged.on_token = [this, answer, &callbacks](TokenId id) {
    token_log_->append(answer, std::span<const TokenId>(&id, 1), {});
    if (callbacks.on_token) callbacks.on_token(id);
  };
  logged.on_text = [this, answer, &callbacks](StreamChannel channel, std::string_view text) {
    if (channel == StreamChannel::kAnswer)
      token_log_->append(answer, {}, text);
    else
      token_log_->append(answer, {}, {}, text);
    if (callbacks.on_text) callbacks.on_text(channel, text);
  };
  return logged;
}

// Generates from the planned state, logging every sampled id and piece of text as it comes; an
// engine error stores the answer interrupted and propagates.
GenerationResult PersistentChat::generate_logged(int64_t session, PlannedPrefill& plan,
                                                 const PreparedTurn& turn,
                                                 const TurnOptions& options,
                                                 const StreamCallbacks& callbacks,
                                                 const std::atomic<bool>* stop, SessionTurn& out) {
  GenerationOptions gen = options.generation;
  gen.starts_in_thinking = options.mode == ThinkingMode::kThinking;
  gen.prefill.replay = plan.replay;
  gen.prefill.mark_at =
      thinking_mark(options.mode, static_cast<int64_t>(turn.rendered.prompt.ids.size()));
  // Images whose span reaches past the restored prefix, or into the replayed tail of it, are
  // encoded now: the replay rebuilds window KV from their embeddings too.
  const std::vector<ImageEmbedding> embeddings = engine_.embed_images(
      turn.rendered.prompt.images, turn.rendered.images, plan.first_prefill_index());
  gen.prefill.images = embeddings;
  const AnswerHandle answer = token_log_->begin_answer(session);
  out.answer_message_id = answer.message_id;
  const StreamCallbacks logged = logged_callbacks(answer, callbacks);
  const auto suffix = std::span<const TokenId>(turn.rendered.prompt.ids)
                          .subspan(static_cast<size_t>(plan.first_prefill_index()));
  GenerationResult result;
  try {
    result = engine_.generator().generate(plan.state, suffix, gen, logged, stop);
  } catch (...) {
    token_log_->finish(answer, MessageStatus::interrupted);  // the state may be half-updated
    live_spilled_ = 0;
    throw;
  }
  const bool stopped = result.finish == FinishReason::kStopped;
  out.status = stopped ? MessageStatus::interrupted : MessageStatus::complete;
  token_log_->finish(answer, out.status, answer_end(result, stopped));
  return result;
}

SessionTurn PersistentChat::send(std::string user_text,
                                 std::span<const std::filesystem::path> image_files,
                                 const TurnOptions& options, const StreamCallbacks& callbacks,
                                 const std::atomic<bool>* stop) {
  if (!session_id_) throw InvalidRequest("no session is open");
  const int64_t sid = *session_id_;
  PreparedTurn turn = prepare_turn(sid, user_text, image_files, options);
  SessionTurn out;
  out.image_spans = turn.image_spans;
  out.turn.prompt_ids = turn.rendered.prompt.ids;
  out.turn.prompt_text = turn.rendered.prompt.text;
  out.user_message_id = store_user_message(sid, std::move(user_text), turn.new_images);

  PlannedPrefill plan = restore_prefix(sid, turn);
  out.corrupt_blocks = plan.corrupt_blocks;
  out.turn.generation = generate_logged(sid, plan, turn, options, callbacks, stop, out);

  add_restore_stats(plan, out.turn.generation.stats);
  live_ = std::move(plan.state);
  live_images_ = out.image_spans;
  // A thinking turn's reasoning and answer are never reused: every later rendering replaces the
  // prompt's <think> (live_reuse.h). The state goes back to its mark now, so the blocks spilled,
  // a window parked on a session switch and the next turn all continue from there.
  if (live_->mark) cut_sequence(engine_.backend(), *live_, live_->mark->position);
  spill_after_turn(out);
  out.storage_warning = storage_warning();
  return out;
}

}  // namespace flashdesk::storage
