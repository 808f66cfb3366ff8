// Remote model entries in QSettings: an array under remote/entries.
#include "ui/remote_entries.h"

namespace flashdesk::ui {

namespace {

constexpr const char* kArray = "remote/entries";

}  // namespace

QList<RemoteEntry> load_remote_entries(QSettings& store) {
  QList<RemoteEntry> entries;
  const int n = store.beginReadArray(QLatin1String(kArray));
  for (int i = 0; i < n && entries.size() < kMaxRemoteEntries; ++i) {
    store.setArrayIndex(i);
    RemoteEntry e{store.value("url").toString().trimmed(), store.value("api_key").toString(),
                  store.value("model").toString().trimmed()};
    if (!e.url.isEmpty() && !e.model.isEmpty()) entries << e;
  }
  store.endArray();
  return entries;
}

void remember_remote_entry(QSettings& store, const RemoteEntry& entry) {
  QList<RemoteEntry> entries = load_remote_entries(store);
  entries.removeIf(
      [&](const RemoteEntry& e) { return e.url == entry.url && e.model == entry.model; });
  entries.prepend(entry);
  while (entries.size() > kMaxRemoteEntries) entries.removeLast();
  store.remove(QLatin1String(kArray));
  store.beginWriteArray(QLatin1String(kArray), int(entries.size()));
  for (int i = 0; i < entries.size(); ++i) {
    store.setArrayIndex(i);
    store.setValue("url", entries[i].url);
    store.setValue("api_key", entries[i].api_key);
    store.setValue("model", entries[i].model);
  }
  store.endArray();
  store.sync();
}

}  // namespace flashdesk::ui
