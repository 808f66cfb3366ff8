// Finding the bundled demo model.
#include "ui/model_locator.h"

#include <QDir>
#include <QFileInfo>
#include <QStringList>

namespace flashdesk::ui {

QString default_model_dir(const QString& application_dir) {
  const QString relative = QStringLiteral("models/flash-tiny");
  QStringList candidates;
  const QString from_env = qEnvironmentVariable("FLASHDESK_MODEL");
  if (!from_env.isEmpty()) candidates << from_env;
  candidates << application_dir + QStringLiteral("/../share/flashdesk/") + relative;
#ifdef FLASHDESK_INSTALLED_MODEL_DIR  // the install prefix's, also when the binary was moved
  candidates << QStringLiteral(FLASHDESK_INSTALLED_MODEL_DIR);
#endif
  candidates << application_dir + QStringLiteral("/../../assets/") + relative
             << application_dir + QStringLiteral("/../../../assets/") + relative;
#ifdef FLASHDESK_SOURCE_DIR
  candidates << QStringLiteral(FLASHDESK_SOURCE_DIR "/assets/") + relative;
#endif
  for (const QString& dir : candidates) {
    if (QFileInfo(dir + QStringLiteral("/config.json")).isFile())
      return QDir::cleanPath(QDir(dir).absolutePath());
  }
  return {};
}

}  // namespace flashdesk::ui
