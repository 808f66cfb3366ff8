// `flashdesk-cli sessions ...` end to end: the built binary on a real data folder.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "storage/session_json.h"
#include "storage/session_store.h"
#include "storage_test_util.h"

namespace flashdesk::storage {
namespace {

struct CliRun {
  int exit_code;
  std::string out;  // standard output and error together
};

CliRun cli(const std::string& args) {
  const std::string command = std::string(FD_CLI_PATH) + " sessions " + args + " 2>&1";
  std::FILE* p = ::popen(command.c_str(), "r");
  CliRun r{-1, {}};
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

class SessionsCli : public ::testing::Test {
 protected:
  std::string in_dir(const std::string& args) {
    return args + " --data-dir '" + dir.path().string() + "'";
  }
  testing::TempDir dir;
};

TEST_F(SessionsCli, ImportListShowRenameExportDelete) {
  const std::string fixture = std::string(FD_SOURCE_DIR) + "/tests/data/storage/sessions-v1.json";
  const CliRun imported = cli(in_dir("import '" + fixture + "'"));
  ASSERT_EQ(imported.exit_code, 0) << imported.out;
  const std::string id = imported.out.substr(0, imported.out.find('\n'));

  const auto list = nlohmann::json::parse(cli(in_dir("list --json")).out);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["id"].dump(), id);
  EXPECT_EQ(list[0]["title"], "Fixture: a version 1 session");
  EXPECT_EQ(list[0]["message_count"], 2);
  EXPECT_NE(cli(in_dir("list")).out.find("Fixture: a version 1 session"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(cli(in_dir("list --json --search colour")).out).size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(cli(in_dir("list --json --search absent")).out).size(), 0u);

  const auto shown = nlohmann::json::parse(cli(in_dir("show " + id + " --json")).out);
  ASSERT_EQ(shown["messages"].size(), 2u);
  EXPECT_EQ(shown["messages"][0]["text"], "What colour is the square?");
  EXPECT_EQ(shown["messages"][0]["attachments"][0]["mime_type"], "image/png");
  EXPECT_EQ(shown["messages"][1]["token_count"], 3);
  EXPECT_NE(cli(in_dir("show " + id)).out.find("Red."), std::string::npos);

  ASSERT_EQ(cli(in_dir("rename " + id + " 'Renamed chat'")).exit_code, 0);
  const std::string exported_file = (dir.path() / "out.json").string();
  ASSERT_EQ(cli(in_dir("export " + id + " -o '" + exported_file + "'")).exit_code, 0);
  std::ifstream in(exported_file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const SessionExport exported = session_from_json(text, exported_file);
  EXPECT_EQ(exported.title, "Renamed chat");
  ASSERT_EQ(exported.messages.size(), 2u);
  EXPECT_EQ(exported.messages[0].message.images.size(), 1u);

  const CliRun deleted = cli(in_dir("delete " + id));
  EXPECT_EQ(deleted.exit_code, 0);
  EXPECT_NE(deleted.out.find("deleted: 2 messages, 1 image files"), std::string::npos)
      << deleted.out;
  EXPECT_EQ(nlohmann::json::parse(cli(in_dir("list --json")).out).size(), 0u);
}

TEST_F(SessionsCli, BadInputGivesAClearErrorAndNonZeroExit) {
  const std::string bad = (dir.path() / "bad.json").string();
  std::ofstream(bad) << "{\"format\": \"flashdesk-session\", \"version\": 1, \"title\": 3}";
  const CliRun r = cli(in_dir("import '" + bad + "'"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("bad.json: title: expected a string"), std::string::npos) << r.out;
  const CliRun missing = cli(in_dir("show 42"));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.out.find("no session with id 42"), std::string::npos) << missing.out;
  EXPECT_NE(cli(in_dir("show abc")).out.find("not a session ID"), std::string::npos);
  EXPECT_EQ(cli(in_dir("frobnicate")).exit_code, 1);
}

TEST_F(SessionsCli, DefaultsToTheXdgDataFolder) {
  const std::string env = "XDG_DATA_HOME='" + (dir.path() / "xdg-data").string() +
                          "' XDG_CACHE_HOME='" + (dir.path() / "xdg-cache").string() + "' ";
  const std::string command = env + FD_CLI_PATH + " sessions list --json 2>&1";
  std::FILE* p = ::popen(command.c_str(), "r");
  char buf[256];
  std::string out;
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0) << out;
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "xdg-data/flashdesk/sessions.sqlite"));
  EXPECT_TRUE(std::filesystem::is_directory(dir.path() / "xdg-cache/flashdesk/kv"));
}

}  // namespace
}  // namespace flashdesk::storage
