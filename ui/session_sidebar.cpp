// The sidebar's widgets and its context menu.
#include "ui/session_sidebar.h"

#include <QLineEdit>
#include <QListView>
#include <QMenu>
#include <QMessageBox>
#include <QPushButton>
#include <QVBoxLayout>

namespace flashdesk::ui {

SessionSidebar::SessionSidebar(QWidget* parent)
    : QWidget(parent),
      model_(new SessionListModel(this)),
      search_(new QLineEdit(this)),
      new_(new QPushButton(tr("New chat"), this)),
      list_(new QListView(this)) {
  search_->setPlaceholderText(tr("Search chats"));
  search_->setClearButtonEnabled(true);
  search_->setAccessibleName(tr("Search chats by title and content"));
  new_->setAccessibleName(tr("New chat"));
  list_->setModel(model_);
  list_->setAccessibleName(tr("Chats"));
  list_->setEditTriggers(QAbstractItemView::EditKeyPressed | QAbstractItemView::DoubleClicked);
  list_->setContextMenuPolicy(Qt::CustomContextMenu);
  // Long titles are cut with an ellipsis (the tooltip and rename show them whole), never scrolled
  // sideways.
  list_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  list_->setTextElideMode(Qt::ElideRight);
  list_->setWordWrap(false);
  list_->setUniformItemSizes(true);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(new_);
  layout->addWidget(search_);
  layout->addWidget(list_, 1);

  connect(new_, &QPushButton::clicked, this, &SessionSidebar::newRequested);
  connect(search_, &QLineEdit::textChanged, this, &SessionSidebar::searchChanged);
  connect(list_, &QListView::customContextMenuRequested, this, &SessionSidebar::showMenu);
  connect(list_, &QListView::clicked, this, [this](const QModelIndex& index) {
    const qint64 id = model_->idAt(index.row());
    if (id == selected_) return;
    selected_ = id;
    emit sessionActivated(id);
  });
  connect(model_, &QAbstractItemModel::modelReset, this, [this] { select(selected_); });
}

void SessionSidebar::select(qint64 id) {
  selected_ = id;
  const int row = model_->rowOf(id);
  if (row >= 0) list_->setCurrentIndex(model_->index(row));
}

void SessionSidebar::showMenu(const QPoint& position) {
  const QModelIndex index = list_->indexAt(position);
  if (!index.isValid()) return;
  QMenu menu(this);
  menu.addAction(tr("Rename"), this, [this, index] { list_->edit(index); });
  const qint64 id = model_->idAt(index.row());
  const QString title = index.data().toString();
  menu.addAction(tr("Delete"), this, [this, id, title] { confirmDelete(id, title); });
  menu.exec(list_->viewport()->mapToGlobal(position));
}

void SessionSidebar::confirmDelete(qint64 id, const QString& title) {
  QMessageBox box(
      QMessageBox::Question, tr("Delete chat"),
      tr("Delete \"%1\"? Its messages, images and cached KV are erased from disk.").arg(title),
      QMessageBox::Yes | QMessageBox::No, this);
  box.setTextFormat(Qt::PlainText);  // a title may come from an imported file: never markup
  if (box.exec() == QMessageBox::Yes) emit deleteRequested(id);
}

}  // namespace flashdesk::ui
