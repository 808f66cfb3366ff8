// The sidebar's session list model.
#include "ui/session_list_model.h"

#include <QDateTime>
#include <QLocale>

namespace flashdesk::ui {

QString when_text(qint64 ms, const QDateTime& now) {
  const QDateTime when = QDateTime::fromMSecsSinceEpoch(ms);
  const QLocale locale;
  const QString time = locale.toString(when.time(), QLocale::ShortFormat);
  const qint64 days = when.date().daysTo(now.date());
  if (days == 0) return QObject::tr("Today %1").arg(time);
  if (days == 1) return QObject::tr("Yesterday %1").arg(time);
  const QString format = when.date().year() == now.date().year() ? QStringLiteral("d MMM")
                                                                 : QStringLiteral("d MMM yyyy");
  return locale.toString(when.date(), format) + QLatin1Char(' ') + time;
}

int SessionListModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(rows_.size());
}

QVariant SessionListModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
    return {};
  const SessionRow& row = rows_[index.row()];
  switch (role) {
    case Qt::DisplayRole:  // two lines: the title, then when it was last used
      return row.title + QLatin1Char('\n') + when_text(row.updated_ms);
    case Qt::EditRole:
      return row.title;
    case Qt::ToolTipRole:  // the whole title, which the list may cut
      return tr("%1\n%2 messages, last used %3")
          .arg(row.title)
          .arg(row.message_count)
          .arg(QDateTime::fromMSecsSinceEpoch(row.updated_ms).toString(Qt::TextDate));
    case IdRole:
      return row.id;
    case UpdatedRole:
      return row.updated_ms;
    case MessageCountRole:
      return row.message_count;
    default:
      return {};
  }
}

bool SessionListModel::setData(const QModelIndex& index, const QVariant& value, int role) {
  if (role != Qt::EditRole || !checkIndex(index, CheckIndexOption::IndexIsValid)) return false;
  const QString title = value.toString().trimmed();
  if (title.isEmpty() || title == rows_[index.row()].title) return false;
  emit renameRequested(rows_[index.row()].id, title);
  return false;  // the worker's next listing carries the new title
}

Qt::ItemFlags SessionListModel::flags(const QModelIndex& index) const {
  return QAbstractListModel::flags(index) |
         (index.isValid() ? Qt::ItemIsEditable : Qt::NoItemFlags);
}

QHash<int, QByteArray> SessionListModel::roleNames() const {
  auto names = QAbstractListModel::roleNames();
  names[IdRole] = "sessionId";
  names[UpdatedRole] = "updatedMs";
  names[MessageCountRole] = "messageCount";
  return names;
}

int SessionListModel::rowOf(qint64 id) const {
  for (int i = 0; i < rows_.size(); ++i)
    if (rows_[i].id == id) return i;
  return -1;
}

qint64 SessionListModel::idAt(int row) const {
  return row >= 0 && row < rows_.size() ? rows_[row].id : 0;
}

void SessionListModel::setRows(const QList<SessionRow>& rows) {
  beginResetModel();
  rows_ = rows;
  endResetModel();
}

}  // namespace flashdesk::ui
