// The window's menus (every command with its shortcut), the app settings dialog and the theme
// switch: the parts of MainWindow that act on the whole application rather than on a chat.
#include <QActionGroup>
#include <QApplication>
#include <QEvent>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>

#include "ui/app_settings_dialog.h"
#include "ui/cache_panel.h"
#include "ui/effort_control.h"
#include "ui/main_window.h"
#include "ui/placement_view.h"
#include "ui/session_sidebar.h"
#include "ui/theme.h"
#include "ui/welcome_text.h"

namespace flashdesk::ui {

// Every command is a menu action, so its shortcut is listed where users look for it.
void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addAction(tr("&New chat"), QKeySequence::New, this, &MainWindow::newSession);
  file->addAction(tr("&Open model folder…"), QKeySequence::Open, this,
                  &MainWindow::openModelFolder);
  file->addAction(tr("Re&load the model"), QKeySequence(Qt::Key_F5), this,
                  &MainWindow::reloadModel);
  buildServeAndRemote(file);
  file->addSeparator();
  file->addAction(tr("&Settings…"), QKeySequence(tr("Ctrl+,")), this, &MainWindow::editAppSettings);
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);
  QMenu* chat = menuBar()->addMenu(tr("&Chat"));
  chat->addAction(tr("&Search chats"), QKeySequence::Find, sidebar_->searchField(),
                  qOverload<>(&QWidget::setFocus));
  chat->addAction(tr("S&top the answer"), QKeySequence(Qt::Key_Escape), this, &MainWindow::stop);
  chat->addAction(tr("&Regenerate the last answer"), QKeySequence(tr("Ctrl+R")), this,
                  &MainWindow::regenerate);
  chat->addAction(tr("Chat s&ettings…"), QKeySequence(tr("Ctrl+Shift+,")), this,
                  &MainWindow::editSettings);
  buildViewMenu();
  buildHelpMenu();
}

void MainWindow::buildHelpMenu() {
  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&About FlashDesk"), this, &MainWindow::showAbout);
  help->addAction(tr("About &Qt"), qApp, &QApplication::aboutQt);
}

// Non-modal, so the chat goes on while it is open.
void MainWindow::showAbout() {
  auto* box = new QMessageBox(QMessageBox::Information, tr("About FlashDesk"),
                              about_text(model_label_, model_dir_, model_backend_),
                              QMessageBox::Close, this);
  box->setObjectName(QStringLiteral("aboutBox"));
  box->setTextFormat(Qt::RichText);
  box->setAttribute(Qt::WA_DeleteOnClose);
  box->open();
}

void MainWindow::buildViewMenu() {
  QMenu* view = menuBar()->addMenu(tr("&View"));
  QMenu* theme = view->addMenu(tr("&Theme"));
  const std::pair<ThemeChoice, QString> choices[] = {{ThemeChoice::system, tr("&System")},
                                                     {ThemeChoice::light, tr("&Light")},
                                                     {ThemeChoice::dark, tr("&Dark")}};
  for (const auto& [choice, name] : choices) {
    QAction* action = theme->addAction(name, this, [this, c = choice] { setTheme(c); });
    action->setCheckable(true);
    action->setChecked(choice == app_settings_.theme);
    action->setData(theme_key(choice));
    themes_->addAction(action);
  }
  showPaletteKind();
  QAction* cache = cache_panel_->toggleViewAction();
  cache->setText(tr("&Cache panel"));
  cache->setShortcut(QKeySequence(tr("Ctrl+Shift+K")));
  view->addAction(cache);
  QAction* placement = view->addAction(tr("Model &placement…"), this,
                                       [this] { open_placement_dialog(this, model_dir_); });
  placement->setObjectName(QStringLiteral("showPlacement"));
}

QAction* MainWindow::themeAction(ThemeChoice choice) const {
  for (QAction* action : themes_->actions())
    if (action->data().toString() == theme_key(choice)) return action;
  return nullptr;
}

// "System" says which way the desktop's palette goes, so the choice is visible before it is made.
void MainWindow::showPaletteKind() {
  if (QAction* system = themeAction(ThemeChoice::system))
    system->setText(is_dark(QApplication::palette()) && app_settings_.theme == ThemeChoice::system
                        ? tr("&System (dark now)")
                        : tr("&System"));
}

void MainWindow::setTheme(ThemeChoice choice) {
  app_settings_.theme = choice;
  apply_theme(choice);
  if (QAction* action = themeAction(choice)) action->setChecked(true);
  if (settings_store_) save_app_settings(*settings_store_, app_settings_);
}

// The palette changed (our switch, or the desktop's theme while on System): colours that are not
// palette roles follow here.
void MainWindow::changeEvent(QEvent* event) {
  QMainWindow::changeEvent(event);
  if (event->type() == QEvent::PaletteChange || event->type() == QEvent::ThemeChange ||
      event->type() == QEvent::ApplicationPaletteChange) {
    show_as_error(model_error_);
    show_as_error(storage_warning_);
    showPaletteKind();
  }
}

AppSettingsDialog* MainWindow::editAppSettings() {
  auto* dialog = new AppSettingsDialog(app_settings_, this);
  if (model_ready_)
    dialog->setDraftHead(
        model_draft_head_,
        tr("The model %1 has no DSpark draft head (or runs on several devices)").arg(model_label_),
        model_backend_);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  connect(dialog, &QDialog::accepted, this,
          [this, dialog] { applyAppSettings(dialog->settings()); });
  dialog->open();
  return dialog;
}

void MainWindow::applyAppSettings(const AppSettings& settings) {
  const bool restart = settings.data_dir != app_settings_.data_dir;
  const bool caches = settings.kv_disk_budget_bytes != app_settings_.kv_disk_budget_bytes ||
                      settings.kv_retention_hours != app_settings_.kv_retention_hours ||
                      settings.window_pool_budget_bytes != app_settings_.window_pool_budget_bytes ||
                      settings.window_pool_ttl_minutes != app_settings_.window_pool_ttl_minutes;
  const bool device =
      settings.backend != app_settings_.backend || settings.threads != app_settings_.threads;
  app_settings_ = settings;
  if (settings_store_) save_app_settings(*settings_store_, app_settings_);
  if (current_ == 0) {  // the chat not made yet takes the new defaults
    choices_ = app_settings_.new_chat;
    effort_->setChoices(choices_);
  }
  if (device) controller_.setDevice(settings.backend, settings.threads);
  if (caches) controller_.setCacheLimits(cache_limits(settings));
  controller_.setSpeculative(settings.speculative);  // from the next turn
  QStringList notes;
  if (restart) notes << tr("The new data folder applies after a restart");
  if (caches)
    notes << tr("The new cache sizes apply at the next model load (File ▸ Reload the model, F5)");
  if (device)
    notes << tr("Backend %1 with %2 apply at the next model load (File ▸ Reload the model, F5)")
                 .arg(settings.backend, settings.threads == 0
                                            ? tr("every core")
                                            : tr("%n thread(s)", "", settings.threads));
  if (!notes.isEmpty()) status_->setText(notes.join(QStringLiteral(". ")));
}

}  // namespace flashdesk::ui
