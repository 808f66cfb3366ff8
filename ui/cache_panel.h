// The cache panel (View ▸ Cache): KV bytes and blocks on the SSD, how much of this run's prompts
// came back from the caches, the window pool's use. It only shows CacheStats the worker sends
// (after each turn, and every few seconds while the panel is visible, since blocks are written in
// the background after a turn); asking is a queued call, so the GUI never waits on the database.
#pragma once

#include <QDockWidget>
#include <QTimer>

#include "ui/chat_types.h"

class QLabel;

namespace flashdesk::ui {

class CachePanel : public QDockWidget {
  Q_OBJECT

 public:
  explicit CachePanel(QWidget* parent = nullptr);

  const CacheStats& stats() const { return stats_; }
  QString text() const;  // every figure as shown, one per line (tests, accessibility)

 public slots:
  void showStats(const flashdesk::ui::CacheStats& stats);

 signals:
  void refreshRequested();

 protected:
  void showEvent(QShowEvent* event) override;
  void hideEvent(QHideEvent* event) override;

 private:
  QLabel* addRow(const QString& name);
  void requestRefresh();

  CacheStats stats_;
  QTimer refresh_;
  bool awaiting_ = false;  // a request is queued to the worker, not answered yet
  QWidget* body_;
  QLabel* ssd_;
  QLabel* blocks_;
  QLabel* hit_rate_;
  QLabel* block_reads_;
  QLabel* pool_;
};

QString byte_text(uint64_t bytes);  // "1.5 GiB", "12.0 MiB", "300 bytes"

}  // namespace flashdesk::ui
