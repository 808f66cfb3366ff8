// Turns of persistent chat sessions: render, restore the cached prefix, generate with the token
// log, spill the new global-KV blocks.
#include "storage/persistent_chat.h"

#include <algorithm>

#include "engine/util/error.h"
#include "storage/kv_spill.h"
#include "storage/prefix_planner.h"
#include "storage/window_snapshot.h"

namespace flashdesk::storage {
namespace {

// Splits an answer's logged ids (every sampled id: reasoning, </think>, content, EOS) back into
// the reasoning and content ids the chat template renders.
void set_answer_ids(const Message& m, const SpecialTokenIds& special, ChatMessage& out) {
  const std::vector<TokenId>& ids = m.token_ids;
  auto end = ids.end();
  if (!ids.empty() && ids.back() == special.eos) --end;
  const auto think_end = std::find(ids.begin(), end, special.think_end);
  if (think_end != end) {
    out.reasoning_ids = std::vector<TokenId>(ids.begin(), think_end);
    out.content_ids = std::vector<TokenId>(think_end + 1, end);
  } else if (m.text.empty() && !m.thinking.empty()) {  // cut short while reasoning
    out.reasoning_ids = std::vector<TokenId>(ids.begin(), end);
    out.content_ids = std::vector<TokenId>{};
  } else {
    out.content_ids = std::vector<TokenId>(ids.begin(), end);
  }
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

// The session's system prompt and stored messages, each user message with its images (images
// first, as user_message places them), ready for the new user message. An engine that cannot
// read images renders the stored messages' text only (the session stays usable with it).
PersistentChat::Conversation PersistentChat::conversation(const SessionInfo& info,
                                                          const std::vector<Message>& stored) {
  Conversation out;
  if (!info.settings.system_prompt.empty())
    out.messages.push_back(ChatMessage::system(info.settings.system_prompt));
  const SpecialTokenIds& special = engine_.chat_template().special();
  for (const Message& m : stored) {
    if (m.role == Role::user) {
      // A model without vision continuing the session sees the text only, as before images.
      if (!engine_.has_vision()) {
        out.messages.push_back(ChatMessage::user(m.text));
        continue;
      }
      std::vector<ImageRef> images;
      for (const Attachment& a : m.attachments) {
        images.push_back(stored_image(a));
        out.digests.push_back(a.digest);
      }
      out.messages.push_back(user_message(m.text, images));
      out.images.insert(out.images.end(), images.begin(), images.end());
    } else {
      ChatMessage a = ChatMessage::assistant(m.text, m.thinking);
      set_answer_ids(m, special, a);
      out.messages.push_back(std::move(a));
    }
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

SessionTurn PersistentChat::send(std::string user_text,
                                 std::span<const std::filesystem::path> image_files,
                                 const TurnOptions& options, const StreamCallbacks& callbacks,
                                 const std::atomic<bool>* stop) {
  if (!session_id_) throw InvalidRequest("no session is open");
  const int64_t sid = *session_id_;
  const SessionInfo info = store_->session(sid);
  std::vector<UserImage> new_images;  // read and checked before anything is stored
  for (const std::filesystem::path& file : image_files)
    new_images.push_back(read_user_image(engine_, file));

  // Render the stored conversation and the new message before storing it: a stored image that
  // cannot be read any more fails the turn with the session unchanged.
  Conversation conv = conversation(info, store_->messages(sid));
  std::vector<ImageRef> user_images;
  for (const UserImage& image : new_images) {
    user_images.push_back(image.prepared);
    conv.images.push_back(image.prepared);
    conv.digests.push_back(image.digest);
  }
  conv.messages.push_back(user_message(user_text, user_images));
  const ChatOptions chat{.mode = options.mode, .effort = options.effort};
  const RenderedPrompt rendered = engine_.chat_template().render(conv.messages, chat);
  SessionTurn out;
  out.image_spans = prompt_image_spans(rendered.images, conv.digests);
  std::vector<TokenId>& prompt = out.turn.prompt_ids;
  prompt = rendered.ids;

  NewMessage user;
  user.role = Role::user;
  user.text = std::move(user_text);
  for (UserImage& image : new_images) {
    prepared_images_.emplace(image.digest, image.prepared);
    user.images.push_back(std::move(image.stored));
  }
  out.user_message_id = store_->append_message(sid, user);

  // Restore: live KV, SSD blocks, window pool. Blocks below the reused live prefix stay spilled.
  const PrefixSources sources{engine_.model(), engine_.fingerprint(),
                              options_.use_ssd ? blocks_.get() : nullptr,
                              options_.use_window_pool ? pool_.get() : nullptr, sid};
  const int64_t spilled_before = live_spilled_;
  PlannedPrefill plan =
      plan_prefill(sources, std::move(live_), prompt, out.image_spans, live_images_);
  forget_live();
  const int64_t B = blocks_->tokens_per_block();
  live_spilled_ =
      std::max(plan.reused_ram > 0 ? std::min(spilled_before, plan.reused_ram / B * B) : int64_t{0},
               plan.reused_ssd);
  out.corrupt_blocks = plan.corrupt_blocks;

  GenerationOptions gen = options.generation;
  gen.starts_in_thinking = options.mode == ThinkingMode::kThinking;
  gen.prefill.replay = plan.replay;
  // Images whose span reaches past the restored prefix, or into the replayed tail of it, are
  // encoded now: the replay rebuilds window KV from their embeddings too.
  const std::vector<ImageEmbedding> embeddings =
      engine_.embed_images(rendered.images, conv.images, plan.first_prefill_index());
  gen.prefill.images = embeddings;
  const AnswerHandle answer = token_log_->begin_answer(sid);
  out.answer_message_id = answer.message_id;
  StreamCallbacks logged;
  logged.on_token = [&](TokenId id) {
    token_log_->append(answer, std::span<const TokenId>(&id, 1), {});
    if (callbacks.on_token) callbacks.on_token(id);
  };
  logged.on_text = [&](StreamChannel channel, std::string_view text) {
    if (channel == StreamChannel::kAnswer)
      token_log_->append(answer, {}, text);
    else
      token_log_->append(answer, {}, {}, text);
    if (callbacks.on_text) callbacks.on_text(channel, text);
  };
  const auto suffix =
      std::span<const TokenId>(prompt).subspan(static_cast<size_t>(plan.first_prefill_index()));
  try {
    out.turn.generation = engine_.generator().generate(plan.state, suffix, gen, logged, stop);
  } catch (...) {
    token_log_->finish(answer, MessageStatus::interrupted);  // the state may be half-updated
    live_spilled_ = 0;
    throw;
  }
  out.status = out.turn.generation.finish == FinishReason::kStopped ? MessageStatus::interrupted
                                                                    : MessageStatus::complete;
  token_log_->finish(answer, out.status);

  GenerationStats& s = out.turn.generation.stats;
  s.reused_ram_tokens = plan.reused_ram;
  s.reused_ssd_tokens = plan.reused_ssd;
  s.reused_pool_tokens = plan.reused_pool;
  s.bytes_read = plan.bytes_read;
  s.plan_ms = plan.plan_ms;
  s.read_ms = plan.read_ms;
  s.load_ms = plan.load_ms;
  s.ttft_ms += plan.plan_ms + plan.read_ms + plan.load_ms;
  live_ = std::move(plan.state);
  live_images_ = out.image_spans;
  spill_after_turn(out);
  out.storage_warning = storage_warning();
  return out;
}

}  // namespace flashdesk::storage
