// `flashdesk-cli chat --remote URL --session new|ID`: a chat with a model served elsewhere, kept in
// the local session store like a local model's (the app's remote models do the same). Each turn
// resends the stored history (answers as text, pictures from their stored files); the user
// message is stored before it is sent and the answer logged as it streams, so a stopped or
// crashed turn keeps what arrived. KV persistence does not apply: the server owns its cache.
#pragma once

#if defined(FLASHDESK_HAVE_REMOTE) && defined(FLASHDESK_HAVE_STORAGE)
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/remote/remote_chat.h"
#include "storage/session_store.h"
#include "storage/storage_layout.h"
#include "storage/token_log.h"

namespace flashdesk::cli {

class RemoteSession {
 public:
  // Opens the data folder's stores (the first process on it repairs, as for local sessions).
  RemoteSession(remote::RemoteChat& chat, remote::RemoteOptions endpoint,
                const storage::StorageLayout& layout);
  ~RemoteSession();

  // A new session with these settings (its system prompt is sent with every turn); returns its id.
  int64_t create(const TurnOptions& options, std::string system_prompt);
  // Continues a stored session: InvalidRequest when there is none.
  void open(int64_t id);
  int64_t id() const { return *id_; }

  // One turn: the stored history and the new message (text after the image files) sent, the
  // answer streamed to `callbacks` and stored (interrupted when stopped or failed).
  GenerationResult send(const std::string& text, const std::vector<std::filesystem::path>& images,
                        const TurnOptions& options, const StreamCallbacks& callbacks,
                        const std::atomic<bool>* stop);

 private:
  // The session's fingerprint: a remote model is named by its id and endpoint.
  std::string fingerprint() const;
  std::vector<remote::RemoteMessage> history();

  remote::RemoteChat& chat_;
  remote::RemoteOptions endpoint_;
  std::optional<storage::InstanceLock> lock_;
  std::unique_ptr<storage::SessionStore> store_;
  std::unique_ptr<storage::TokenLog> token_log_;
  std::optional<int64_t> id_;
};

}  // namespace flashdesk::cli
#endif
