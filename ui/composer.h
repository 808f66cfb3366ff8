// The message composer: multi-line input (Enter sends, Shift+Enter breaks the line), images by
// drag-and-drop, paste or file picker shown as thumbnails with a remove button, send and stop.
#pragma once

#include <QPlainTextEdit>
#include <QStringList>
#include <QTemporaryDir>
#include <QWidget>

class QHBoxLayout;
class QLabel;
class QMimeData;
class QPushButton;

namespace flashdesk::ui {

// The text field: reports Enter and pasted images to the composer.
class ComposerEdit : public QPlainTextEdit {
  Q_OBJECT

 public:
  explicit ComposerEdit(QWidget* parent = nullptr);

 signals:
  void enterPressed();
  void mimeDataPasted(const QMimeData* data);

 protected:
  void keyPressEvent(QKeyEvent* event) override;
  bool canInsertFromMimeData(const QMimeData* source) const override;
  void insertFromMimeData(const QMimeData* source) override;
};

class Composer : public QWidget {
  Q_OBJECT

 public:
  explicit Composer(QWidget* parent = nullptr);

  ComposerEdit* edit() const { return edit_; }
  const QStringList& attachments() const { return attachments_; }
  QString errorText() const;
  void setText(const QString& text);
  void clearMessage();  // text and attachments, after sending

 public slots:
  // True when attached; otherwise the reason is shown under the input.
  bool addImageFile(const QString& path);
  bool addImage(const QImage& image);  // pasted pixels, saved as a PNG file
  void removeAttachment(int index);
  void showError(const QString& message);
  void setGenerating(bool generating);
  void pickImages();
  void submit();

 signals:
  void submitted(const QString& text, const QStringList& images);
  void stopRequested();

 protected:
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;
  void changeEvent(QEvent* event) override;  // the error colour follows the theme

 private:
  void acceptMimeData(const QMimeData* data);
  void rebuildStrip();

  ComposerEdit* edit_;
  QWidget* strip_;
  QHBoxLayout* strip_layout_;
  QLabel* error_;
  QPushButton* attach_;
  QPushButton* send_;
  QPushButton* stop_;
  QStringList attachments_;
  QTemporaryDir pasted_dir_;  // pasted images live here until the composer goes
  int pasted_count_ = 0;
  bool generating_ = false;
};

}  // namespace flashdesk::ui
