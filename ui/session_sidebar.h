// The session sidebar: search by title and content, new, rename (in place), delete (confirmed).
#pragma once

#include <QWidget>

#include "ui/session_list_model.h"

class QLineEdit;
class QListView;
class QPushButton;

namespace flashdesk::ui {

class SessionSidebar : public QWidget {
  Q_OBJECT

 public:
  explicit SessionSidebar(QWidget* parent = nullptr);

  SessionListModel* model() const { return model_; }
  QLineEdit* searchField() const { return search_; }
  QListView* list() const { return list_; }
  void select(qint64 id);  // highlights without emitting sessionActivated

 signals:
  void newRequested();
  void sessionActivated(qint64 id);
  void deleteRequested(qint64 id);
  void searchChanged(const QString& text);

 private:
  void showMenu(const QPoint& position);
  void confirmDelete(qint64 id, const QString& title);

  SessionListModel* model_;
  QLineEdit* search_;
  QPushButton* new_;
  QListView* list_;
  qint64 selected_ = 0;
};

}  // namespace flashdesk::ui
