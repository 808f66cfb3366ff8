// The cache panel's rows and their refresh timer.
#include "ui/cache_panel.h"

#include <QFormLayout>
#include <QLabel>

namespace flashdesk::ui {

namespace {

constexpr int kRefreshMs = 2000;
constexpr int kPanelWidth = 320;     // px: the dock's widest
constexpr int kPanelMinWidth = 180;  // px: its narrowest, figures wrapped

QString percent(int64_t part, int64_t whole) {
  return whole > 0 ? QStringLiteral("%1%").arg(100.0 * double(part) / double(whole), 0, 'f', 1)
                   : QStringLiteral("–");
}

}  // namespace

QString byte_text(uint64_t bytes) {
  const double b = double(bytes);
  if (b >= double(uint64_t{1} << 30)) return QObject::tr("%1 GiB").arg(b / (1 << 30), 0, 'f', 2);
  if (b >= double(1 << 20)) return QObject::tr("%1 MiB").arg(b / (1 << 20), 0, 'f', 1);
  if (b >= 1024) return QObject::tr("%1 KiB").arg(b / 1024, 0, 'f', 1);
  return QObject::tr("%1 bytes").arg(bytes);
}

CachePanel::CachePanel(QWidget* parent)
    : QDockWidget(tr("Cache"), parent),
      body_(new QWidget(this)),
      ssd_(addRow(tr("KV on SSD"))),
      blocks_(addRow(tr("Blocks"))),
      hit_rate_(addRow(tr("Prompt tokens from cache"))),
      block_reads_(addRow(tr("Block reads"))),
      pool_(addRow(tr("Window pool"))) {
  setObjectName(QStringLiteral("cachePanel"));
  setAccessibleName(tr("Cache statistics"));
  setWidget(body_);
  // The panel docks beside the chat: it takes at most this much of the window and never makes the
  // window wider (a wider window can run off the screen, taking the Send button with it).
  setMaximumWidth(kPanelWidth);
  body_->setMinimumWidth(kPanelMinWidth);
  refresh_.setInterval(kRefreshMs);
  connect(&refresh_, &QTimer::timeout, this, &CachePanel::requestRefresh);
  showStats(stats_);
}

QLabel* CachePanel::addRow(const QString& name) {
  auto* form = qobject_cast<QFormLayout*>(body_->layout());
  if (!form) {
    form = new QFormLayout(body_);
    form->setRowWrapPolicy(QFormLayout::WrapAllRows);  // names above values: a narrow panel
  }
  auto* value = new QLabel(body_);
  value->setAccessibleName(name);
  value->setTextInteractionFlags(Qt::TextSelectableByMouse);
  value->setWordWrap(true);  // long figures wrap instead of widening the panel (and the window)
  form->addRow(name, value);
  return value;
}

// One question at a time: during a long turn the worker answers only after it, and the timer's
// requests must not pile up behind it.
void CachePanel::requestRefresh() {
  if (awaiting_) return;
  awaiting_ = true;
  emit refreshRequested();
}

void CachePanel::showStats(const CacheStats& s) {
  awaiting_ = false;
  stats_ = s;
  const QString none = tr("no SSD cache (no model loaded)");
  ssd_->setText(s.has_caches ? byte_text(uint64_t(s.ssd_bytes)) : none);
  blocks_->setText(QString::number(s.ssd_blocks));
  hit_rate_->setText(
      tr("%1 from SSD, %2 in memory (%3 of %4 prompt tokens in %n turn(s))", nullptr, int(s.turns))
          .arg(percent(s.restored_tokens, s.prompt_tokens))
          .arg(percent(s.reused_tokens, s.prompt_tokens))
          .arg(s.restored_tokens + s.reused_tokens)
          .arg(s.prompt_tokens));
  block_reads_->setText(tr("%1 hit, %2 missed, %3 failed writes")
                            .arg(s.block_reads_hit)
                            .arg(s.block_reads_missed)
                            .arg(s.block_writes_failed));
  pool_->setText(tr("%1 of %2 (%n window(s))", nullptr, int(s.pool_entries))
                     .arg(byte_text(s.pool_bytes), byte_text(s.pool_budget_bytes)));
}

QString CachePanel::text() const {
  QStringList lines;
  for (const QLabel* label : {ssd_, blocks_, hit_rate_, block_reads_, pool_})
    lines << label->accessibleName() + QStringLiteral(": ") + label->text();
  return lines.join(QLatin1Char('\n'));
}

void CachePanel::showEvent(QShowEvent* event) {
  QDockWidget::showEvent(event);
  requestRefresh();
  refresh_.start();
}

void CachePanel::hideEvent(QHideEvent* event) {
  QDockWidget::hideEvent(event);
  refresh_.stop();
}

}  // namespace flashdesk::ui
