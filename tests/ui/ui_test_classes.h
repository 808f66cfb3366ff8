// The UI test classes, one factory per file, created once by the test main.
#pragma once

#include <QByteArray>
#include <QObject>
#include <QString>
#include <memory>
#include <vector>

namespace flashdesk::ui::test {

std::unique_ptr<QObject> make_composer_test();
std::unique_ptr<QObject> make_effort_control_test();
std::unique_ptr<QObject> make_session_list_test();
std::unique_ptr<QObject> make_app_test();
std::unique_ptr<QObject> make_app_settings_test();
std::unique_ptr<QObject> make_cache_panel_test();
std::unique_ptr<QObject> make_model_load_test();
std::unique_ptr<QObject> make_image_chat_test();
std::unique_ptr<QObject> make_window_fit_test();
std::unique_ptr<QObject> make_safe_text_test();
std::unique_ptr<QObject> make_local_server_test();
std::unique_ptr<QObject> make_remote_model_test();
std::unique_ptr<QObject> make_dspark_switch_test();
std::unique_ptr<QObject> make_server_key_test();

inline std::vector<std::unique_ptr<QObject>> make_test_objects() {
  std::vector<std::unique_ptr<QObject>> tests;
  tests.push_back(make_composer_test());
  tests.push_back(make_effort_control_test());
  tests.push_back(make_session_list_test());
  tests.push_back(make_app_test());
  tests.push_back(make_app_settings_test());
  tests.push_back(make_cache_panel_test());
  tests.push_back(make_model_load_test());
  tests.push_back(make_image_chat_test());
  tests.push_back(make_window_fit_test());
  tests.push_back(make_safe_text_test());
  tests.push_back(make_local_server_test());
  tests.push_back(make_remote_model_test());
  tests.push_back(make_dspark_switch_test());
  tests.push_back(make_server_key_test());
  return tests;
}

// A real PNG file of w × h pixels (a colour gradient) at dir/name; returns its path.
QString write_png(const QString& dir, const QString& name, int w, int h);
// A file holding exactly `bytes`; returns its path.
QString write_bytes(const QString& dir, const QString& name, const QByteArray& bytes);
// KV block files the data folder `data_dir` holds on the SSD.
int kv_block_files(const QString& data_dir);

}  // namespace flashdesk::ui::test
