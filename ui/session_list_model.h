// The sessions of the sidebar as a list model; renaming through the view's editor asks the worker
// (the model changes only when the worker lists the sessions again).
#pragma once

#include <QAbstractListModel>
#include <QDateTime>

#include "ui/chat_types.h"

namespace flashdesk::ui {

// When a chat was last used, as the sidebar shows it: "Today 14:05", "Yesterday 09:12",
// "3 Dec 18:40" (another year: "3 Dec 2025 18:40").
QString when_text(qint64 ms, const QDateTime& now = QDateTime::currentDateTime());

// Rows show the title and, on a second line, when the chat was last used (equal titles stay
// apart); editing edits the title alone.
class SessionListModel : public QAbstractListModel {
  Q_OBJECT

 public:
  enum Roles { IdRole = Qt::UserRole + 1, UpdatedRole, MessageCountRole };

  using QAbstractListModel::QAbstractListModel;

  int rowCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  bool setData(const QModelIndex& index, const QVariant& value, int role = Qt::EditRole) override;
  Qt::ItemFlags flags(const QModelIndex& index) const override;
  QHash<int, QByteArray> roleNames() const override;

  int rowOf(qint64 id) const;  // -1 when absent
  qint64 idAt(int row) const;

 public slots:
  void setRows(const QList<flashdesk::ui::SessionRow>& rows);

 signals:
  void renameRequested(qint64 id, const QString& title);

 private:
  QList<SessionRow> rows_;
};

}  // namespace flashdesk::ui
