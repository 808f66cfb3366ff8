// What an empty chat says: how to start, and for the bundled demo model (flash-tiny) what it was
// trained to do, so a first look at the app is not an empty grey area. Also the About text.
#pragma once

#include <QString>

namespace flashdesk::ui {

// For the loaded model `model_name` (empty: none loaded yet). Rich text.
QString welcome_text(const QString& model_name);

// Help ▸ About: the app, its version, and the model it runs (empty: none). Rich text.
QString about_text(const QString& model_name, const QString& model_dir, const QString& backend);

}  // namespace flashdesk::ui
