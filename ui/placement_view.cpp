// View > Model placement (placement_view.h). Plain text, not Markdown: the plan quotes the model's
// name from its config, which is outside data.
#include "ui/placement_view.h"

#include <QDialog>
#include <QDialogButtonBox>
#include <QFontDatabase>
#include <QPlainTextEdit>
#include <QVBoxLayout>
#include <exception>
#include <filesystem>

#include "engine/checkpoint/config.h"
#include "engine/placement/machine_detect.h"
#include "engine/placement/placement_plan.h"

namespace flashdesk::ui {

QString placement_text(const QString& model_dir) {
  if (model_dir.isEmpty()) return QDialog::tr("No model is loaded.");
  try {
    const std::filesystem::path config =
        std::filesystem::path(model_dir.toStdString()) / "config.json";
    const ModelConfig c = load_model_config(config.string());
    const MachineSpec machine = detect_machine();
    return QString::fromStdString(describe_plan(c, machine, plan_placement(c, machine)));
  } catch (const std::exception& e) {
    return QDialog::tr("No placement plan: %1").arg(QString::fromUtf8(e.what()));
  }
}

QDialog* open_placement_dialog(QWidget* parent, const QString& model_dir) {
  auto* dialog = new QDialog(parent);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  dialog->setObjectName(QStringLiteral("placementDialog"));
  dialog->setWindowTitle(QDialog::tr("Model placement on this machine"));
  auto* text = new QPlainTextEdit(placement_text(model_dir), dialog);
  text->setObjectName(QStringLiteral("placementText"));
  text->setReadOnly(true);
  text->setLineWrapMode(QPlainTextEdit::NoWrap);
  text->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, dialog);
  QObject::connect(buttons, &QDialogButtonBox::rejected, dialog, &QDialog::reject);
  auto* layout = new QVBoxLayout(dialog);
  layout->addWidget(text);
  layout->addWidget(buttons);
  dialog->resize(900, 420);
  dialog->open();
  return dialog;
}

}  // namespace flashdesk::ui
