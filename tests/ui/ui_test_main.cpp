// Runs the UI test classes (all, or the one named by the first argument) in one QApplication.
#include <QApplication>
#include <QTest>
#include <cstring>
#include <memory>

#include "tests/ui/ui_test_classes.h"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  std::vector<std::unique_ptr<QObject>> tests = flashdesk::ui::test::make_test_objects();
  const char* only = argc > 1 && argv[1][0] != '-' ? argv[1] : nullptr;
  QStringList args{QString::fromUtf8(argv[0])};
  for (int i = only ? 2 : 1; i < argc; ++i) args << QString::fromUtf8(argv[i]);
  int failures = 0;
  bool ran = false;
  for (const auto& test : tests) {
    if (only && std::strcmp(test->metaObject()->className() + std::strlen("flashdesk::ui::test::"),
                            only) != 0)
      continue;
    ran = true;
    failures += QTest::qExec(test.get(), args);
  }
  if (!ran) qWarning("no test class named %s", only);
  return ran ? failures : 1;
}
