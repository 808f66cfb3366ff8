// The settings' keys, defaults and ranges, and their translation into storage options.
#include "ui/app_settings.h"

#include <chrono>

#include "app/server/api_key.h"
#include "engine/runtime/backend_factory.h"
#include "ui/persistent_chat_service.h"

namespace flashdesk::ui {

namespace {

// One stored number: its key and the range it must lie in.
struct NumberKey {
  const char* key;
  double min;
  double max;
};

constexpr NumberKey kDiskBudget{"kv/disk_budget_bytes", double(kGiB) / 4,
                                double(uint64_t{1} << 50)};
constexpr NumberKey kRetention{"kv/retention_hours", 1, double(kMaxRetentionHours)};
constexpr NumberKey kPoolBudget{"window_pool/budget_bytes", 0, double(uint64_t{1} << 44)};
constexpr NumberKey kPoolTtl{"window_pool/ttl_minutes", 1, double(kMaxPoolTtlMinutes)};
constexpr NumberKey kTemperature{"new_chat/temperature", 0.0, 2.0};
constexpr NumberKey kTopP{"new_chat/top_p", 0.01, 1.0};
constexpr NumberKey kMaxNewTokens{"new_chat/max_new_tokens", 1, double(1 << 20)};
constexpr NumberKey kEffort{"new_chat/effort", 1, 100};
constexpr NumberKey kThinking{"new_chat/thinking", 0, 1};  // 1: on
constexpr NumberKey kThreads{"engine/threads", 0, double(kMaxThreads)};
constexpr NumberKey kServe{"server/serve", 0, 1};  // 1: on
constexpr NumberKey kServerPort{"server/port", 0, 65535};
constexpr const char* kBackend = "engine/backend";
constexpr const char* kDataDir = "data_dir";
constexpr const char* kSystemPrompt = "new_chat/system_prompt";
constexpr const char* kTheme = "view/theme";
constexpr const char* kSpeculative = "engine/speculative";  // speculative_key
constexpr const char* kServerHost = "server/host";
constexpr const char* kServerApiKey = "server/api_key";

// The stored number at `k`, or `fallback` (with a problem line) when it is not a number in range.
template <class T>
T read_number(const QSettings& store, const NumberKey& k, T fallback, QStringList* problems) {
  if (!store.contains(QLatin1String(k.key))) return fallback;
  const QString stored = store.value(QLatin1String(k.key)).toString();
  bool ok = false;
  const double value = stored.toDouble(&ok);
  if (ok && value >= k.min && value <= k.max) return static_cast<T>(value);
  if (problems)
    *problems << QStringLiteral("%1: \"%2\" is not a number from %3 to %4; using %5")
                     .arg(QLatin1String(k.key), stored)
                     .arg(k.min, 0, 'g', 15)
                     .arg(k.max, 0, 'g', 15)
                     .arg(double(fallback), 0, 'g', 15);
  return fallback;
}

// The stored speculative choice, or the default (with a problem line) when it is no choice.
SpeculativeChoice read_speculative(const QSettings& store, SpeculativeChoice fallback,
                                   QStringList* problems) {
  const QString stored =
      store.value(QLatin1String(kSpeculative), speculative_key(fallback)).toString();
  if (const auto choice = speculative_from_key(stored)) return *choice;
  if (problems)
    *problems << QStringLiteral("%1: \"%2\" is not auto, on or off; using %3")
                     .arg(QLatin1String(kSpeculative), stored, speculative_key(fallback));
  return fallback;
}

}  // namespace

QString speculative_key(SpeculativeChoice choice) {
  switch (choice) {
    case SpeculativeChoice::kAuto:
      return QStringLiteral("auto");
    case SpeculativeChoice::kOn:
      return QStringLiteral("on");
    case SpeculativeChoice::kOff:
      return QStringLiteral("off");
  }
  return QStringLiteral("auto");
}

std::optional<SpeculativeChoice> speculative_from_key(const QString& key) {
  // "1" and "0": the on/off switch of earlier versions, read as the choice it was.
  if (key == QLatin1String("auto")) return SpeculativeChoice::kAuto;
  if (key == QLatin1String("on") || key == QLatin1String("1")) return SpeculativeChoice::kOn;
  if (key == QLatin1String("off") || key == QLatin1String("0")) return SpeculativeChoice::kOff;
  return std::nullopt;
}

QString server_settings_problem(const QString& host, const QString& api_key) {
  if (host.trimmed().isEmpty()) return QObject::tr("The API server needs an address to listen on.");
  if (!server::is_loopback(host.trimmed().toStdString()) && api_key.isEmpty())
    return QObject::tr("Listening on %1 (not loopback) needs an API key.").arg(host.trimmed());
  return {};
}

namespace {

// The host and key, or loopback (with a problem line) when the host would need a key it lacks.
void read_server_address(const QSettings& store, AppSettings& s, QStringList* problems) {
  const QString host = store.value(QLatin1String(kServerHost), s.server_host).toString().trimmed();
  const QString key = store.value(QLatin1String(kServerApiKey)).toString();
  s.server_api_key = key;
  if (server_settings_problem(host, key).isEmpty()) {
    s.server_host = host;
  } else if (problems) {
    *problems << QStringLiteral("%1: \"%2\" is not loopback and no API key is set; using %3")
                     .arg(QLatin1String(kServerHost), host, s.server_host);
  }
}

}  // namespace

QStringList backend_choices() {
  QStringList names;
  for (const std::string& name : backend_names()) names << QString::fromStdString(name);
  return names;
}

AppSettings load_app_settings(const QSettings& store, QStringList* problems) {
  AppSettings s;
  s.data_dir = store.value(QLatin1String(kDataDir)).toString();
  s.kv_disk_budget_bytes = read_number(store, kDiskBudget, s.kv_disk_budget_bytes, problems);
  s.kv_retention_hours = read_number(store, kRetention, s.kv_retention_hours, problems);
  s.window_pool_budget_bytes =
      read_number(store, kPoolBudget, s.window_pool_budget_bytes, problems);
  s.window_pool_ttl_minutes = read_number(store, kPoolTtl, s.window_pool_ttl_minutes, problems);
  s.new_chat.system_prompt = store.value(QLatin1String(kSystemPrompt)).toString();
  s.new_chat.temperature = read_number(store, kTemperature, s.new_chat.temperature, problems);
  s.new_chat.top_p = read_number(store, kTopP, s.new_chat.top_p, problems);
  s.new_chat.max_new_tokens =
      read_number(store, kMaxNewTokens, s.new_chat.max_new_tokens, problems);
  s.new_chat.effort = read_number(store, kEffort, s.new_chat.effort, problems);
  s.new_chat.thinking = read_number(store, kThinking, int(s.new_chat.thinking), problems) != 0;
  const QString theme = store.value(QLatin1String(kTheme), theme_key(s.theme)).toString();
  if (const auto choice = theme_from_key(theme)) {
    s.theme = *choice;
  } else if (problems) {
    *problems << QStringLiteral("%1: \"%2\" is not system, light or dark; using system")
                     .arg(QLatin1String(kTheme), theme);
  }
  const QString backend = store.value(QLatin1String(kBackend), s.backend).toString();
  if (backend_choices().contains(backend)) {
    s.backend = backend;
  } else if (problems) {
    *problems << QStringLiteral("%1: \"%2\" is not a backend of this build (%3); using %4")
                     .arg(QLatin1String(kBackend), backend, backend_choices().join(", "),
                          s.backend);
  }
  s.threads = read_number(store, kThreads, s.threads, problems);
  s.serve = read_number(store, kServe, int(s.serve), problems) != 0;
  s.server_port = read_number(store, kServerPort, s.server_port, problems);
  s.speculative = read_speculative(store, s.speculative, problems);
  read_server_address(store, s, problems);
  return s;
}

void save_app_settings(QSettings& store, const AppSettings& s) {
  store.setValue(QLatin1String(kDataDir), s.data_dir);
  store.setValue(QLatin1String(kDiskBudget.key), qulonglong(s.kv_disk_budget_bytes));
  store.setValue(QLatin1String(kRetention.key), qlonglong(s.kv_retention_hours));
  store.setValue(QLatin1String(kPoolBudget.key), qulonglong(s.window_pool_budget_bytes));
  store.setValue(QLatin1String(kPoolTtl.key), qlonglong(s.window_pool_ttl_minutes));
  store.setValue(QLatin1String(kSystemPrompt), s.new_chat.system_prompt);
  store.setValue(QLatin1String(kTemperature.key), s.new_chat.temperature);
  store.setValue(QLatin1String(kTopP.key), s.new_chat.top_p);
  store.setValue(QLatin1String(kMaxNewTokens.key), qlonglong(s.new_chat.max_new_tokens));
  store.setValue(QLatin1String(kEffort.key), s.new_chat.effort);
  store.setValue(QLatin1String(kThinking.key), s.new_chat.thinking ? 1 : 0);
  store.setValue(QLatin1String(kTheme), theme_key(s.theme));
  store.setValue(QLatin1String(kBackend), s.backend);
  store.setValue(QLatin1String(kThreads.key), s.threads);
  store.setValue(QLatin1String(kServe.key), s.serve ? 1 : 0);
  store.setValue(QLatin1String(kServerPort.key), s.server_port);
  store.setValue(QLatin1String(kSpeculative), speculative_key(s.speculative));
  store.setValue(QLatin1String(kServerHost), s.server_host);
  store.setValue(QLatin1String(kServerApiKey), s.server_api_key);
  store.sync();
}

storage::StorageLayout storage_layout(const AppSettings& settings) {
  return settings.data_dir.isEmpty() ? storage::StorageLayout::from_environment()
                                     : storage::StorageLayout::in(settings.data_dir.toStdString());
}

CacheLimits cache_limits(const AppSettings& settings) {
  return {.ssd_budget_bytes = settings.kv_disk_budget_bytes,
          .ssd_retention = std::chrono::hours(settings.kv_retention_hours),
          .pool_budget_bytes = settings.window_pool_budget_bytes,
          .pool_ttl = std::chrono::minutes(settings.window_pool_ttl_minutes)};
}

storage::PersistentChatOptions persistent_chat_options(const AppSettings& settings,
                                                       storage::StorageLayout layout) {
  storage::PersistentChatOptions options{.layout = std::move(layout)};
  apply_cache_limits(cache_limits(settings), options);
  return options;
}

}  // namespace flashdesk::ui
