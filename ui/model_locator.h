// Where the bundled demo model (assets/models/flash-tiny) is: beside a build tree, in an install
// prefix, or in the source tree the app was built from.
#pragma once

#include <QString>

namespace flashdesk::ui {

// The first folder holding a config.json among: $FLASHDESK_MODEL, <app dir>/../share/flashdesk/
// models/flash-tiny, the install prefix's share/flashdesk/models/flash-tiny (the .deb's
// /usr/share/...), <app dir>/../../assets/models/flash-tiny (build/<preset>/bin), the source
// tree's assets/models/flash-tiny. Empty when none exists.
QString default_model_dir(const QString& application_dir);

}  // namespace flashdesk::ui
