// The composer's input handling, attachment strip and buttons.
#include "ui/composer.h"

#include <algorithm>

#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QMimeData>
#include <QPushButton>
#include <QToolButton>
#include <QVBoxLayout>

#include "ui/image_files.h"
#include "ui/theme.h"

namespace flashdesk::ui {

namespace {

constexpr int kThumbnailEdge = 64;

bool carries_files_or_image(const QMimeData* data) {
  return data->hasImage() || (data->hasUrls() && !data->urls().isEmpty());
}

}  // namespace

ComposerEdit::ComposerEdit(QWidget* parent) : QPlainTextEdit(parent) {
  setAcceptDrops(false);  // drops go to the composer, which handles files and text alike
  setTabChangesFocus(true);
}

void ComposerEdit::keyPressEvent(QKeyEvent* event) {
  const bool enter = event->key() == Qt::Key_Return || event->key() == Qt::Key_Enter;
  if (enter && !(event->modifiers() & Qt::ShiftModifier)) {
    emit enterPressed();
    return;
  }
  QPlainTextEdit::keyPressEvent(event);
}

bool ComposerEdit::canInsertFromMimeData(const QMimeData* source) const {
  return carries_files_or_image(source) || QPlainTextEdit::canInsertFromMimeData(source);
}

void ComposerEdit::insertFromMimeData(const QMimeData* source) {
  if (carries_files_or_image(source)) {
    emit mimeDataPasted(source);
    return;
  }
  QPlainTextEdit::insertFromMimeData(source);
}

Composer::Composer(QWidget* parent)
    : QWidget(parent),
      edit_(new ComposerEdit(this)),
      strip_(new QWidget(this)),
      strip_layout_(new QHBoxLayout(strip_)),
      error_(new QLabel(this)),
      attach_(new QPushButton(tr("Image…"), this)),
      send_(new QPushButton(tr("Send"), this)),
      stop_(new QPushButton(tr("Stop"), this)) {
  setAcceptDrops(true);
  edit_->setPlaceholderText(
      tr("Message FlashDesk (Enter sends, Shift+Enter new line; drop or "
         "paste images)"));
  edit_->setAccessibleName(tr("Message"));
  edit_->setMaximumHeight(90);
  strip_layout_->setContentsMargins(0, 0, 0, 0);
  strip_layout_->addStretch();
  strip_->hide();
  error_->setObjectName(QStringLiteral("composerError"));
  show_as_error(error_);
  error_->setWordWrap(true);
  error_->hide();
  attach_->setAccessibleName(tr("Attach an image"));
  send_->setAccessibleName(tr("Send"));
  send_->setDefault(true);
  stop_->setAccessibleName(tr("Stop the answer"));
  stop_->hide();

  auto* buttons = new QHBoxLayout;
  buttons->addWidget(attach_);
  buttons->addStretch();
  buttons->addWidget(stop_);
  buttons->addWidget(send_);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(strip_);
  layout->addWidget(edit_);
  layout->addWidget(error_);
  layout->addLayout(buttons);

  connect(edit_, &ComposerEdit::enterPressed, this, &Composer::submit);
  connect(edit_, &ComposerEdit::mimeDataPasted, this, &Composer::acceptMimeData);
  connect(attach_, &QPushButton::clicked, this, &Composer::pickImages);
  connect(send_, &QPushButton::clicked, this, &Composer::submit);
  connect(stop_, &QPushButton::clicked, this, &Composer::stopRequested);
}

QString Composer::errorText() const {
  return error_->isHidden() ? QString() : error_->text();
}

void Composer::setText(const QString& text) {
  edit_->setPlainText(text);
}

void Composer::clearMessage() {
  edit_->clear();
  attachments_.clear();
  rebuildStrip();
  showError({});
}

void Composer::showError(const QString& message) {
  error_->setText(message);
  error_->setVisible(!message.isEmpty());
}

bool Composer::addImageFile(const QString& path) {
  if (const auto problem = image_problem(path)) {
    showError(*problem);
    return false;
  }
  if (!attachments_.contains(path)) attachments_ << path;
  showError({});
  rebuildStrip();
  return true;
}

bool Composer::addImage(const QImage& image) {
  if (image.isNull() || !pasted_dir_.isValid()) {
    showError(tr("The pasted image could not be read"));
    return false;
  }
  const QString path = pasted_dir_.filePath(QStringLiteral("pasted-%1.png").arg(++pasted_count_));
  if (!image.save(path, "PNG")) {
    showError(tr("The pasted image could not be saved to %1").arg(path));
    return false;
  }
  return addImageFile(path);
}

void Composer::removeAttachment(int index) {
  if (index < 0 || index >= attachments_.size()) return;
  attachments_.removeAt(index);
  rebuildStrip();
}

void Composer::rebuildStrip() {
  while (strip_layout_->count() > 1) delete strip_layout_->takeAt(0)->widget();
  for (int i = 0; i < attachments_.size(); ++i) {
    auto* cell = new QWidget(strip_);
    cell->setObjectName(QStringLiteral("attachment"));
    auto* thumb = new QLabel(cell);
    thumb->setObjectName(QStringLiteral("thumbnail"));
    thumb->setPixmap(QPixmap::fromImage(image_thumbnail(attachments_[i], kThumbnailEdge)));
    thumb->setToolTip(attachments_[i]);
    auto* remove = new QToolButton(cell);
    remove->setObjectName(QStringLiteral("removeAttachment"));
    remove->setText(QStringLiteral("✕"));
    remove->setAccessibleName(tr("Remove image %1").arg(i + 1));
    connect(remove, &QToolButton::clicked, this, [this, i] { removeAttachment(i); });
    auto* cell_layout = new QHBoxLayout(cell);
    cell_layout->setContentsMargins(0, 0, 0, 0);
    cell_layout->addWidget(thumb);
    cell_layout->addWidget(remove, 0, Qt::AlignTop);
    strip_layout_->insertWidget(i, cell);
  }
  strip_->setVisible(!attachments_.isEmpty());
}

void Composer::acceptMimeData(const QMimeData* data) {
  // A picture dragged out of a web browser comes as its web address and, from some browsers, its
  // pixels too: the pixels are attached then, since the address is not fetched.
  const QList<QUrl> urls = data->hasUrls() ? data->urls() : QList<QUrl>{};
  const bool any_local =
      std::any_of(urls.begin(), urls.end(), [](const QUrl& url) { return url.isLocalFile(); });
  if (!any_local && data->hasImage()) {
    addImage(qvariant_cast<QImage>(data->imageData()));
    return;
  }
  if (data->hasUrls()) {
    for (const QUrl& url : data->urls()) {
      if (url.isLocalFile()) {
        addImageFile(url.toLocalFile());
      } else {
        showError(tr("%1: only local files can be attached").arg(url.toString()));
      }
    }
  } else if (data->hasImage()) {
    addImage(qvariant_cast<QImage>(data->imageData()));
  }
}

void Composer::dragEnterEvent(QDragEnterEvent* event) {
  if (carries_files_or_image(event->mimeData()) || event->mimeData()->hasText())
    event->acceptProposedAction();
}

void Composer::changeEvent(QEvent* event) {
  QWidget::changeEvent(event);
  if (event->type() == QEvent::PaletteChange) show_as_error(error_);
}

void Composer::dropEvent(QDropEvent* event) {
  const QMimeData* data = event->mimeData();
  if (carries_files_or_image(data)) {
    acceptMimeData(data);
  } else if (data->hasText()) {
    edit_->insertPlainText(data->text());
  }
  event->acceptProposedAction();
}

void Composer::pickImages() {
  const QStringList files =
      QFileDialog::getOpenFileNames(this, tr("Attach images"), QString(),
                                    tr("Images (*.png *.jpg *.jpeg *.webp *.gif *.bmp *.tga)"));
  for (const QString& file : files) addImageFile(file);
}

void Composer::setGenerating(bool generating) {
  generating_ = generating;
  send_->setVisible(!generating);
  stop_->setVisible(generating);
}

void Composer::submit() {
  if (generating_) return;
  const QString text = edit_->toPlainText().trimmed();
  if (text.isEmpty() && attachments_.isEmpty()) return;
  emit submitted(text, attachments_);
}

}  // namespace flashdesk::ui
