// The empty chat's text and the About box (see welcome_text.h).
#include "ui/welcome_text.h"

#include <QObject>

namespace flashdesk::ui {

namespace {

// The demo model's tasks, as README.md ("The demo model") and docs/demo-eval.md measure them.
QString demo_text() {
  return QObject::tr(
      "<p><b>flash-tiny</b> is the small demo model that ships with FlashDesk. It was trained on "
      "a few tasks only; outside them it answers with plausible nonsense.</p>"
      "<p>Try:</p><ul>"
      "<li>tell it something and ask later: it can <b>remember</b> a name or a fact from far "
      "back in the chat (<i>Hi! My name is Quinn.</i> … <i>What is my name?</i>)</li>"
      "<li>4-digit <b>arithmetic</b> with its thinking shown: <i>What is 4821 + 1367?</i> (the "
      "thinking grows with the reasoning effort)</li>"
      "<li>a <b>picture</b> of simple shapes (drop or paste it here, or press Image…): <i>What "
      "colour is the triangle?</i> (assets/examples/shapes.png)</li>"
      "<li>repeating a list: <i>Please repeat after me: Ruth, Calgary, fox</i></li></ul>");
}

}  // namespace

QString welcome_text(const QString& model_name) {
  if (model_name.isEmpty())
    return QObject::tr(
        "<p>No model is loaded yet. Open a model folder (File ▸ Open model folder…) to "
        "start.</p>");
  QString text = QObject::tr("<p>Type a message below to start a chat with <b>%1</b>.</p>")
                     .arg(model_name.toHtmlEscaped());
  if (model_name.startsWith(QStringLiteral("flash-tiny"))) text += demo_text();
  return text;
}

QString about_text(const QString& model_name, const QString& model_dir, const QString& backend) {
  QString text =
      QObject::tr(
          "<h3>FlashDesk %1</h3><p>A desktop chat over an embedded engine for "
          "DeepSeek-V4.1-Flash-class models, running on this computer: nothing is sent "
          "anywhere. Chats and their KV cache are kept in the data folder, so a chat goes "
          "on after a restart without recomputing it.</p>")
          .arg(QStringLiteral(FLASHDESK_VERSION));
  if (model_name.isEmpty())
    return text + QObject::tr(
                      "<p>No model is loaded. The bundled demo model, flash-tiny, is in "
                      "assets/models/flash-tiny (File ▸ Open model folder…).</p>");
  return text +
         QObject::tr("<p>Model: <b>%1</b> on %2<br>%3</p>")
             .arg(model_name.toHtmlEscaped(), backend.toHtmlEscaped(), model_dir.toHtmlEscaped()) +
         (model_name.startsWith(QStringLiteral("flash-tiny")) ? demo_text() : QString());
}

}  // namespace flashdesk::ui
