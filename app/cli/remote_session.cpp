// A remote model's chat stored in the local session store (remote_session.h).
#if defined(FLASHDESK_HAVE_REMOTE) && defined(FLASHDESK_HAVE_STORAGE)
#include "app/cli/remote_session.h"

#include "engine/util/error.h"
#include "storage/session_images.h"

namespace flashdesk::cli {
namespace {

// A stored message as it is resent: the user's text with its stored pictures, or an answer's text.
remote::RemoteMessage remote_message(const storage::Message& stored) {
  remote::RemoteMessage m;
  m.role = stored.role == storage::Role::user ? Role::kUser : Role::kAssistant;
  m.text = stored.text;
  for (const storage::Attachment& a : stored.attachments) {
    remote::RemoteImage image = remote::read_image(a.path);
    image.mime_type = a.mime_type;
    m.images.push_back(std::move(image));
  }
  return m;
}

}  // namespace

RemoteSession::RemoteSession(remote::RemoteChat& chat, remote::RemoteOptions endpoint,
                             const storage::StorageLayout& layout)
    : chat_(chat), endpoint_(std::move(endpoint)) {
  layout.create_directories();
  lock_ = storage::InstanceLock::try_acquire(layout.lock_file());
  store_ = std::make_unique<storage::SessionStore>(
      layout, storage::SessionStoreOptions{.repair = lock_.has_value()});
  token_log_ = std::make_unique<storage::TokenLog>(layout.database());
}

RemoteSession::~RemoteSession() = default;

std::string RemoteSession::fingerprint() const {
  return "remote:" + chat_.model() + "@" + endpoint_.url;  // as the app's remote models
}

int64_t RemoteSession::create(const TurnOptions& options, std::string system_prompt) {
  storage::SessionSettings s;
  s.model_fingerprint = fingerprint();
  s.effort = options.effort.value();
  s.thinking = options.mode == ThinkingMode::kThinking;
  s.system_prompt = std::move(system_prompt);
  s.sampling = options.generation.sampling;
  s.max_new_tokens = options.generation.max_new_tokens;
  id_ = store_->create_session("chat", s);
  return *id_;
}

void RemoteSession::open(int64_t id) {
  store_->session(id);  // InvalidRequest when there is none
  id_ = id;
}

std::vector<remote::RemoteMessage> RemoteSession::history() {
  std::vector<remote::RemoteMessage> messages;
  for (const storage::Message& m : store_->messages(*id_)) messages.push_back(remote_message(m));
  return messages;
}

GenerationResult RemoteSession::send(const std::string& text,
                                     const std::vector<std::filesystem::path>& images,
                                     const TurnOptions& options, const StreamCallbacks& callbacks,
                                     const std::atomic<bool>* stop) {
  if (!id_) throw InvalidRequest("no session is open");
  remote::RemoteMessage user{.role = Role::kUser, .text = text, .images = {}};
  storage::NewMessage stored;
  stored.text = text;
  for (const std::filesystem::path& file : images) {
    remote::RemoteImage image = remote::read_image(file);
    stored.images.push_back(
        {.bytes = image.bytes, .mime_type = storage::image_mime_type(image.bytes, file)});
    user.images.push_back(std::move(image));
  }
  chat_.set_system_prompt(store_->session(*id_).settings.system_prompt);
  chat_.set_history(history());
  store_->append_message(*id_, stored);
  const storage::AnswerHandle answer = token_log_->begin_answer(*id_);
  StreamCallbacks logged = callbacks;
  logged.on_text = [&](StreamChannel channel, std::string_view piece) {
    if (channel == StreamChannel::kAnswer)
      token_log_->append(answer, {}, piece);
    else
      token_log_->append(answer, {}, {}, piece);
    if (callbacks.on_text) callbacks.on_text(channel, piece);
  };
  GenerationResult result;
  try {
    result = chat_.send(user, options, logged, stop);
  } catch (...) {
    token_log_->finish(answer, storage::MessageStatus::interrupted);
    throw;
  }
  const bool stopped = result.finish == FinishReason::kStopped;
  token_log_->finish(
      answer, stopped ? storage::MessageStatus::interrupted : storage::MessageStatus::complete,
      storage::AnswerEnd{.thinking_ms = -1, .stopped = stopped});
  return result;
}

}  // namespace flashdesk::cli
#endif
