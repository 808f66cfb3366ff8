// Application-wide settings: where the data lives, how much SSD and RAM the KV caches may use, the
// defaults of a new chat and the theme. Persisted with QSettings (not in the data folder: the data
// folder is itself a setting). Read once at start: the data folder and the cache budgets take
// effect after a restart; the backend and threads at the next model load; new-chat defaults and
// the theme at once.
//
// Goals: each option declared once (key, default, allowed range) and validated where it is read;
// a bad stored value falls back to its default with a message saying so. Non-goals: per-session
// settings (storage::SessionSettings, SessionSettingsDialog), command-line options (main.cpp; they
// override these for one run).
#pragma once

#include <QSettings>
#include <QStringList>
#include <cstdint>
#include <optional>

#include "engine/runtime/speculative_choice.h"
#include "storage/persistent_chat.h"
#include "ui/chat_service.h"
#include "ui/chat_types.h"
#include "ui/theme.h"

namespace flashdesk::ui {

struct AppSettings {
  QString data_dir;  // empty: the XDG folders (storage::StorageLayout::from_environment)
  uint64_t kv_disk_budget_bytes = storage::KvBlockStoreOptions{}.disk_budget_bytes;
  int64_t kv_retention_hours = 72;
  uint64_t window_pool_budget_bytes = 0;  // 0: 10% of physical RAM
  int64_t window_pool_ttl_minutes = 10;
  SessionChoices
      new_chat;  // effort, thinking, system prompt, sampling, answer length of a new chat
  ThemeChoice theme = ThemeChoice::system;
  // The compute device of the next model load (File > Open model, or a restart).
  QString backend = QStringLiteral("cpu");  // one of flashdesk::backend_names()
  int threads = 0;                          // CPU threads; 0: every core
  // The OpenAI-compatible API on the loaded model (File ▸ Serve on localhost, docs/server.md).
  bool serve = false;      // on at start (the switch's last state)
  int server_port = 8080;  // 0: any free port (the status bar names it)
  // The address it listens on; anything but loopback needs the API key (the CLI's rule:
  // server::is_loopback). The key is kept in plain text in the settings file, as the remote
  // models' keys are.
  QString server_host = QStringLiteral("127.0.0.1");
  QString server_api_key;  // empty: no key (loopback only)
  // DSpark speculative decoding on models with a draft head, from the next turn. Automatic by
  // default: on for a GPU backend, off on the CPU backends, where flash-tiny's head decodes slower
  // than plain decoding (docs/dspark.md "Default").
  SpeculativeChoice speculative = SpeculativeChoice::kAuto;

  bool operator==(const AppSettings&) const = default;
};

// Limits the dialog and the reader share.
inline constexpr uint64_t kGiB = uint64_t{1} << 30;
inline constexpr uint64_t kMiB = uint64_t{1} << 20;
inline constexpr int64_t kMaxRetentionHours = 24 * 365;
inline constexpr int64_t kMaxPoolTtlMinutes = 24 * 60;
inline constexpr int kMaxThreads = 1024;

// How the speculative choice is stored: "auto", "on" or "off" (earlier versions stored 0 or 1).
QString speculative_key(SpeculativeChoice choice);
std::optional<SpeculativeChoice> speculative_from_key(const QString& key);

// The backends this build has (flashdesk::backend_names(): a CUDA backend appears when built).
QStringList backend_choices();

// Reads the stored settings; each missing value is its default, each invalid one too, with a line
// in `problems` naming the key, the stored value and what is used instead.
AppSettings load_app_settings(const QSettings& store, QStringList* problems = nullptr);
void save_app_settings(QSettings& store, const AppSettings& settings);

// Why the API server settings cannot be used (a non-loopback host without a key), or empty.
QString server_settings_problem(const QString& host, const QString& api_key);

// The data folder the settings name (the XDG folders when empty). Throws IoError.
storage::StorageLayout storage_layout(const AppSettings& settings);
// The KV cache sizes of the settings (ChatService::set_cache_limits).
CacheLimits cache_limits(const AppSettings& settings);
// The options PersistentChatService is built with: the budgets and lifetimes above.
storage::PersistentChatOptions persistent_chat_options(const AppSettings& settings,
                                                       storage::StorageLayout layout);

}  // namespace flashdesk::ui
