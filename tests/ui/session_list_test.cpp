// SessionListModel under QAbstractItemModelTester; renaming asks instead of editing in place.
#include <QAbstractItemModelTester>
#include <QLocale>
#include <QSignalSpy>
#include <QTest>

#include "tests/ui/ui_test_classes.h"
#include "ui/session_list_model.h"

namespace flashdesk::ui::test {

class SessionListTest : public QObject {
  Q_OBJECT

 private slots:
  void modelIsConsistentAcrossResets() {
    SessionListModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setRows({{7, "Rust lifetimes", 1000, 4}, {3, "小说大纲", 900, 2}});
    QCOMPARE(model.rowCount(), 2);
    QCOMPARE(model.index(1).data(Qt::EditRole).toString(), QStringLiteral("小说大纲"));
    QVERIFY(model.index(1).data().toString().startsWith(QStringLiteral("小说大纲\n")));
    QCOMPARE(model.index(0).data(SessionListModel::IdRole).toLongLong(), 7);
    QCOMPARE(model.rowOf(3), 1);
    QCOMPARE(model.rowOf(99), -1);
    model.setRows({});
    QCOMPARE(model.rowCount(), 0);
  }

  // The second line of a row says when the chat was last used, in words a person reads.
  void rowsSayWhenTheChatWasLastUsed() {
    const QLocale saved;
    QLocale::setDefault(QLocale(QLocale::English, QLocale::UnitedKingdom));
    const QDateTime now(QDate(2026, 3, 10), QTime(15, 30));
    const auto at = [](const QDateTime& t) { return t.toMSecsSinceEpoch(); };
    QVERIFY(when_text(at(now.addSecs(-3600)), now).startsWith(QStringLiteral("Today ")));
    QVERIFY(when_text(at(now.addDays(-1)), now).startsWith(QStringLiteral("Yesterday ")));
    QVERIFY(when_text(at(now.addDays(-20)), now).contains(QStringLiteral("Feb")));
    QVERIFY(!when_text(at(now.addDays(-20)), now).contains(QStringLiteral("2026")));
    QVERIFY(when_text(at(now.addDays(-400)), now).contains(QStringLiteral("2025")));
    QLocale::setDefault(saved);
  }

  void editingATitleRequestsARename() {
    SessionListModel model;
    model.setRows({{7, "Old", 1000, 0}});
    QSignalSpy rename(&model, &SessionListModel::renameRequested);
    model.setData(model.index(0), QStringLiteral("  New title "));
    QCOMPARE(rename.count(), 1);
    QCOMPARE(rename.front().at(0).toLongLong(), 7);
    QCOMPARE(rename.front().at(1).toString(), QStringLiteral("New title"));
    model.setData(model.index(0), QStringLiteral("   "));  // blank titles are ignored
    QCOMPARE(rename.count(), 1);
  }
};

std::unique_ptr<QObject> make_session_list_test() {
  return std::make_unique<SessionListTest>();
}

}  // namespace flashdesk::ui::test

#include "session_list_test.moc"
