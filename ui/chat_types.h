// The values the chat worker and the widgets exchange through queued signals (Qt value types).
#pragma once

#include <QList>
#include <QMetaType>
#include <QString>
#include <QStringList>

#include "ui/chat_service.h"

namespace flashdesk::ui {

struct SessionRow {
  qint64 id = 0;
  QString title;
  qint64 updated_ms = 0;
  qint64 message_count = 0;
};

struct MessageRow {
  qint64 id = 0;
  bool from_user = true;
  QString text;
  QString thinking;
  double thinking_seconds = -1.0;  // how long the reasoning took; < 0: unknown
  bool interrupted = false;        // cut short: stopped by the user, or the app ended
  bool stopped = false;            // stopped by the user
  QStringList image_paths;
};

// The per-session choices the window shows and the worker stores (storage::SessionSettings
// without the model fingerprint).
struct SessionChoices {
  int effort = 75;  // 1..100
  bool thinking = true;
  QString system_prompt;
  double temperature = 0.0;  // 0: greedy
  double top_p = 1.0;
  qint64 max_new_tokens = 4096;

  bool operator==(const SessionChoices&) const = default;
};

SessionChoices choices_of(const storage::SessionSettings& settings);
// `settings` with the choices applied (the fingerprint and the seed stay).
storage::SessionSettings with_choices(storage::SessionSettings settings,
                                      const SessionChoices& choices);

// Registers the types above for queued connections; call once before connecting.
void register_chat_types();

}  // namespace flashdesk::ui

Q_DECLARE_METATYPE(flashdesk::ui::SessionRow)
Q_DECLARE_METATYPE(flashdesk::ui::MessageRow)
Q_DECLARE_METATYPE(flashdesk::ui::SessionChoices)
Q_DECLARE_METATYPE(flashdesk::ui::TurnStats)
Q_DECLARE_METATYPE(flashdesk::ui::CacheStats)
