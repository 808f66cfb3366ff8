// The session store on real SQLite files: sessions, messages, attachments, search, deletion.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "storage/file_util.h"
#include "storage/kv_block_file.h"
#include "storage/session_store.h"
#include "storage/sqlite_db.h"
#include "storage_test_util.h"

namespace flashdesk::storage {
namespace {

using testing::ManualClock;
using testing::TempDir;
using testing::test_settings;

NewMessage user_text(std::string text, std::vector<TokenId> ids = {}) {
  return {Role::user, std::move(text), "", std::move(ids), MessageStatus::complete, {}, {}};
}

NewImage image(uint64_t seed, size_t n = 3000) {
  return {testing::pattern_bytes(seed, n), "image/png"};
}

// Whether `needle` appears anywhere in the bytes of the files under `dir` (database, WAL...).
bool found_in_files(const std::filesystem::path& dir, std::string_view needle) {
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    const auto bytes = read_whole_file(entry.path());
    const std::string_view s(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    if (s.find(needle) != std::string_view::npos) return true;
  }
  return false;
}

TEST(SessionStore, CreatesListsAndReadsSessions) {
  TempDir dir;
  ManualClock clock;
  SessionStore store(dir.layout(), {.clock = clock.clock()});
  const int64_t a = store.create_session("first", test_settings());
  clock.advance_ms(1000);
  const int64_t b = store.create_session("second", test_settings("model-B"));
  const auto list = store.list_sessions();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].id, b);  // most recently updated first
  EXPECT_EQ(list[1].id, a);
  const SessionInfo s = store.session(a);
  EXPECT_EQ(s.title, "first");
  EXPECT_EQ(s.created_ms, clock.now() - 1000);
  EXPECT_EQ(s.settings.model_fingerprint, "model-A");
  EXPECT_EQ(s.settings.effort, 60);
  EXPECT_TRUE(s.settings.thinking);
  EXPECT_EQ(s.settings.system_prompt, "You are a helpful assistant.");
  EXPECT_FLOAT_EQ(s.settings.sampling.temperature, 0.7f);
  EXPECT_FLOAT_EQ(s.settings.sampling.top_p, 0.9f);
  EXPECT_EQ(s.settings.sampling.seed, 0xfedcba9876543210ull);  // all 64 bits survive SQLite
  EXPECT_EQ(s.settings.max_new_tokens, 512);
  EXPECT_FALSE(store.find_session(b + 100));
  EXPECT_THROW(store.session(b + 100), InvalidRequest);
}

TEST(SessionStore, RejectsInvalidSettings) {
  TempDir dir;
  SessionStore store(dir.layout());
  SessionSettings s = test_settings();
  s.effort = 101;
  EXPECT_THROW(store.create_session("x", s), InvalidRequest);
  s = test_settings();
  s.sampling.top_p = 0.0f;
  EXPECT_THROW(store.create_session("x", s), InvalidRequest);
}

TEST(SessionStore, RenamesAndUpdatesSettings) {
  TempDir dir;
  ManualClock clock;
  SessionStore store(dir.layout(), {.clock = clock.clock()});
  const int64_t id = store.create_session("old", test_settings());
  clock.advance_ms(5000);
  store.rename_session(id, "new name");
  SessionSettings s = test_settings("model-C");
  s.effort = 100;
  s.thinking = false;
  store.update_settings(id, s);
  const SessionInfo info = store.session(id);
  EXPECT_EQ(info.title, "new name");
  EXPECT_EQ(info.updated_ms, clock.now());
  EXPECT_EQ(info.settings.model_fingerprint, "model-C");
  EXPECT_EQ(info.settings.effort, 100);
  EXPECT_FALSE(info.settings.thinking);
  EXPECT_THROW(store.rename_session(id + 1, "x"), InvalidRequest);
}

TEST(SessionStore, AppendsMessagesInOrderWithTokensAndStatus) {
  TempDir dir;
  SessionStore store(dir.layout());
  const int64_t id = store.create_session("chat", test_settings());
  store.append_message(id, user_text("Hi there", {10, 20, 30}));
  store.append_message(id, {Role::assistant,
                            "Hello!",
                            "the user greets me",
                            {40, -1, 129279},
                            MessageStatus::interrupted,
                            {},
                            {}});
  const auto m = store.messages(id);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].ordinal, 0);
  EXPECT_EQ(m[0].role, Role::user);
  EXPECT_EQ(m[0].text, "Hi there");
  EXPECT_EQ(m[0].token_ids, (std::vector<TokenId>{10, 20, 30}));
  EXPECT_EQ(m[1].ordinal, 1);
  EXPECT_EQ(m[1].role, Role::assistant);
  EXPECT_EQ(m[1].thinking, "the user greets me");
  EXPECT_EQ(m[1].token_ids, (std::vector<TokenId>{40, -1, 129279}));
  EXPECT_EQ(m[1].status, MessageStatus::interrupted);
  EXPECT_EQ(store.session(id).message_count, 2);
  EXPECT_THROW(store.append_message(id + 1, user_text("x")), InvalidRequest);
}

TEST(SessionStore, StoresEachImageOnceByDigest) {
  TempDir dir;
  SessionStore store(dir.layout());
  const int64_t a = store.create_session("a", test_settings());
  const int64_t b = store.create_session("b", test_settings());
  NewMessage m = user_text("look");
  m.images = {image(1), image(2)};
  store.append_message(a, m);
  m.images = {image(1)};
  store.append_message(b, m);
  const auto ma = store.messages(a);
  ASSERT_EQ(ma[0].attachments.size(), 2u);
  EXPECT_EQ(ma[0].attachments[0].digest, image_digest(image(1).bytes));
  EXPECT_EQ(ma[0].attachments[1].digest, image_digest(image(2).bytes));
  const auto mb = store.messages(b);
  ASSERT_EQ(mb[0].attachments.size(), 1u);
  EXPECT_EQ(mb[0].attachments[0].path, ma[0].attachments[0].path);  // one file for both
  EXPECT_EQ(read_whole_file(ma[0].attachments[0].path), image(1).bytes);
  size_t files = 0;
  for (const auto& e :
       std::filesystem::recursive_directory_iterator(dir.layout().attachments_dir()))
    files += e.is_regular_file();
  EXPECT_EQ(files, 2u);
  const auto found = store.find_attachment(image_digest(image(2).bytes));
  ASSERT_TRUE(found);
  EXPECT_EQ(found->byte_size, 3000);
  EXPECT_EQ(found->mime_type, "image/png");
}

TEST(SessionStore, SearchesTitlesAndMessageTextLiterally) {
  TempDir dir;
  SessionStore store(dir.layout());
  const int64_t trip = store.create_session("Trip to Lisbon", test_settings());
  const int64_t math = store.create_session("Math", test_settings());
  const int64_t misc = store.create_session("Misc", test_settings());
  store.append_message(math, user_text("What is 50% of 8?"));
  store.append_message(misc, {Role::assistant,
                              "ok",
                              "thinking about snake_case names",
                              {},
                              MessageStatus::complete,
                              {},
                              {}});
  store.append_message(trip, user_text("你好，里斯本"));
  auto ids = [](const std::vector<SessionInfo>& v) {
    std::vector<int64_t> out;
    for (const auto& s : v) out.push_back(s.id);
    return out;
  };
  EXPECT_EQ(ids(store.search("lisbon")), (std::vector<int64_t>{trip}));  // ASCII case-insensitive
  EXPECT_EQ(ids(store.search("50%")), (std::vector<int64_t>{math}));
  EXPECT_EQ(ids(store.search("%")), (std::vector<int64_t>{math}));    // a literal percent sign
  EXPECT_EQ(ids(store.search("e_c")), (std::vector<int64_t>{misc}));  // a literal underscore
  EXPECT_EQ(ids(store.search("里斯本")), (std::vector<int64_t>{trip}));
  EXPECT_TRUE(store.search("nowhere").empty());
}

TEST(SessionStore, DeleteErasesRowsFilesAndOnlyUnsharedBlocks) {
  TempDir dir;
  SessionStore store(dir.layout());
  const int64_t doomed = store.create_session("doomed", test_settings());
  const int64_t kept = store.create_session("kept", test_settings());
  NewMessage m = user_text("secret-marker-7f3a9 is my password");
  m.images = {image(1), image(2)};
  store.append_message(doomed, m);
  NewMessage other = user_text("hello");
  other.images = {image(2)};
  store.append_message(kept, other);

  // Two blocks: one only the doomed session uses, one shared by both.
  const BlockKey only = xxh3_128(as_bytes("only")), shared = xxh3_128(as_bytes("shared"));
  {
    Database db = Database::open(dir.layout().database());
    for (const BlockKey& k : {only, shared}) {
      std::filesystem::create_directories(block_file_path(dir.layout().kv_dir(), k).parent_path());
      std::ofstream(block_file_path(dir.layout().kv_dir(), k)) << "block";
      db.query("INSERT INTO kv_blocks VALUES (?1, NULL, 'model-A', 256, 5, 0, 0, 0)")
          .with(k.hex())
          .run();
    }
    db.query("INSERT INTO session_kv_blocks VALUES (?1, ?2)").with(doomed, only.hex()).run();
    db.query("INSERT INTO session_kv_blocks VALUES (?1, ?2)").with(doomed, shared.hex()).run();
    db.query("INSERT INTO session_kv_blocks VALUES (?1, ?2)").with(kept, shared.hex()).run();
  }
  const auto path1 = store.messages(doomed)[0].attachments[0].path;
  const auto path2 = store.messages(doomed)[0].attachments[1].path;

  const EraseReport r = store.delete_session(doomed);
  EXPECT_EQ(r.messages, 1);
  EXPECT_EQ(r.attachments_removed, 1);
  EXPECT_EQ(r.blocks_removed, 1);
  EXPECT_FALSE(store.find_session(doomed));
  EXPECT_FALSE(std::filesystem::exists(path1));
  EXPECT_TRUE(std::filesystem::exists(path2));  // the kept session's message shows it too
  EXPECT_FALSE(std::filesystem::exists(block_file_path(dir.layout().kv_dir(), only)));
  EXPECT_TRUE(std::filesystem::exists(block_file_path(dir.layout().kv_dir(), shared)));
  EXPECT_FALSE(store.find_attachment(image_digest(image(1).bytes)));
  // Really erased: the text is in no file of the data folder (database, WAL) any more.
  EXPECT_FALSE(found_in_files(dir.path(), "secret-marker-7f3a9"));
  EXPECT_EQ(store.messages(kept).size(), 1u);
  EXPECT_THROW(store.delete_session(doomed), InvalidRequest);
}

TEST(SessionStore, DeleteVacuumsWhenManyPagesAreFree) {
  TempDir dir;
  SessionStore store(dir.layout(), {.vacuum_threshold_bytes = 256 << 10});
  const int64_t big = store.create_session("big", test_settings());
  const int64_t small = store.create_session("small", test_settings());
  for (int i = 0; i < 40; ++i)
    store.append_message(big, user_text(std::string(20000, static_cast<char>('a' + i % 26))));
  store.append_message(small, user_text("tiny"));
  EXPECT_FALSE(store.delete_session(small).vacuumed);  // a few bytes: not worth it
  const auto size_before = std::filesystem::file_size(dir.layout().database());  // checkpointed
  EXPECT_GT(size_before, 800'000u);
  const EraseReport r = store.delete_session(big);
  EXPECT_TRUE(r.vacuumed);
  EXPECT_LT(std::filesystem::file_size(dir.layout().database()), size_before / 4);
}

TEST(SessionStore, RepairRemovesAttachmentFilesWithoutRows) {
  TempDir dir;
  dir.layout().create_directories();
  const auto stray = dir.layout().attachments_dir() / "ab" / "abababababababababababababababab";
  const auto temp = dir.layout().attachments_dir() / "cd" / "x.tmp-123-0";
  for (const auto& p : {stray, temp}) {
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << "left by a crash";
  }
  {
    SessionStore store(dir.layout());  // not the owner: touches nothing
    EXPECT_TRUE(std::filesystem::exists(stray));
  }
  SessionStore store(dir.layout(), {.repair = true});
  EXPECT_EQ(store.repair_report().orphan_files_removed, 2);
  EXPECT_FALSE(std::filesystem::exists(stray));
  EXPECT_FALSE(std::filesystem::exists(temp));
}

TEST(InstanceLock, OnlyOneHolderAtATime) {
  TempDir dir;
  const auto file = dir.path() / "flashdesk.lock";
  auto first = InstanceLock::try_acquire(file);
  ASSERT_TRUE(first);
  EXPECT_FALSE(InstanceLock::try_acquire(file));
  first.reset();
  EXPECT_TRUE(InstanceLock::try_acquire(file));
}

TEST(StorageLayout, FollowsXdgVariablesAndFallsBackToHome) {
  const char* saved[3] = {std::getenv("XDG_DATA_HOME"), std::getenv("XDG_CACHE_HOME"),
                          std::getenv("HOME")};
  const std::string keep[3] = {saved[0] ? saved[0] : "", saved[1] ? saved[1] : "",
                               saved[2] ? saved[2] : ""};
  ::setenv("XDG_DATA_HOME", "/x/data", 1);
  ::setenv("XDG_CACHE_HOME", "/x/cache", 1);
  auto l = StorageLayout::from_environment();
  EXPECT_EQ(l.database(), "/x/data/flashdesk/sessions.sqlite");
  EXPECT_EQ(l.kv_dir(), "/x/cache/flashdesk/kv");
  ::setenv("XDG_DATA_HOME", "relative/ignored", 1);
  ::unsetenv("XDG_CACHE_HOME");
  ::setenv("HOME", "/home/u", 1);
  l = StorageLayout::from_environment();
  EXPECT_EQ(l.data_dir, "/home/u/.local/share/flashdesk");
  EXPECT_EQ(l.cache_dir, "/home/u/.cache/flashdesk");
  const char* names[3] = {"XDG_DATA_HOME", "XDG_CACHE_HOME", "HOME"};
  for (int i = 0; i < 3; ++i)
    saved[i] ? ::setenv(names[i], keep[i].c_str(), 1) : ::unsetenv(names[i]);
}

}  // namespace
}  // namespace flashdesk::storage
