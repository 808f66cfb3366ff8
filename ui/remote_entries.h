// The remote model entries the user added (File ▸ Remote models): endpoint URL, API key and model
// id, kept with the app settings in QSettings, most recently used first.
//
// Goals: an entry added again (same URL and model) moves to the top with its new key rather than
// being listed twice; entries without a URL or model are skipped when read. Non-goals: keeping
// the API key secret beyond the settings file's permissions (QSettings stores it in plain text,
// as the dialog says).
#pragma once

#include <QList>
#include <QSettings>
#include <QString>

namespace flashdesk::ui {

struct RemoteEntry {
  QString url;      // the API base, e.g. http://gpu-box:8000/v1
  QString api_key;  // empty: none
  QString model;    // an id the endpoint's /v1/models lists

  bool operator==(const RemoteEntry&) const = default;
  QString label() const { return model + QStringLiteral(" — ") + url; }
};

inline constexpr int kMaxRemoteEntries = 16;

// Non-const: QSettings reads arrays through its begin/end API (nothing is written).
QList<RemoteEntry> load_remote_entries(QSettings& store);
// Puts `entry` first (replacing one with its URL and model) and saves the list.
void remember_remote_entry(QSettings& store, const RemoteEntry& entry);

}  // namespace flashdesk::ui
