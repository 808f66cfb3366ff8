// The sessions of the sidebar as a list model; renaming through the view's editor asks the worker
// (the model changes only when the worker lists the sessions again).
#pragma once

#include <QAbstractListModel>

#include "ui/chat_types.h"

namespace flashdesk::ui {

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
