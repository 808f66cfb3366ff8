// The placement plan of a model on this machine (engine/placement: GPUs, host memory, SSD) as
// the app shows it: View > Model placement.
#pragma once

#include <QString>

class QDialog;
class QWidget;

namespace flashdesk::ui {

// The plan's text for the model in `model_dir` (its config.json) on this machine, or why there is
// none (no model, an unreadable config).
QString placement_text(const QString& model_dir);

// A read-only, non-modal dialog with that text (objectName "placementDialog", text widget
// "placementText"); deleted when closed.
QDialog* open_placement_dialog(QWidget* parent, const QString& model_dir);

}  // namespace flashdesk::ui
