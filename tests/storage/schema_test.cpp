// The session database's schema: version, pragmas, reopening, refusing newer files, and opening a
// committed real version-1 file (tests/data/storage/sessions-v1.sqlite).
#include <gtest/gtest.h>

#include <filesystem>

#include "storage/file_util.h"
#include "storage/kv_block_store.h"
#include "storage/schema.h"
#include "storage/session_store.h"
#include "storage/sqlite_db.h"
#include "storage/token_log.h"
#include "storage_test_util.h"

namespace flashdesk::storage {
namespace {

using testing::TempDir;

TEST(Schema, NewDatabaseIsCurrentVersionInWalModeWithForeignKeys) {
  TempDir dir;
  { SessionStore store(dir.layout()); }
  Database db = Database::open(dir.layout().database());
  EXPECT_EQ(schema_version(db), kSchemaVersion);
  Query mode = db.query("PRAGMA journal_mode");
  ASSERT_TRUE(mode.step());
  EXPECT_EQ(mode.text(0), "wal");
  EXPECT_EQ(db.scalar_int64("PRAGMA foreign_keys"), 1);
}

TEST(Schema, ForeignKeysAreEnforced) {
  TempDir dir;
  { SessionStore store(dir.layout()); }
  Database db = Database::open(dir.layout().database());
  EXPECT_THROW(db.exec("INSERT INTO messages (session_id, ordinal, role, text, thinking, "
                       "token_ids, status, created_ms, updated_ms) "
                       "VALUES (999, 0, 'user', '', '', x'', 'complete', 0, 0)"),
               DatabaseError);
}

TEST(Schema, DatabaseCreatedByThisBuildReopensWithItsData) {
  TempDir dir;
  int64_t id;
  {
    SessionStore store(dir.layout());
    id = store.create_session("kept", testing::test_settings());
    store.append_message(id, {Role::user, "hello", "", {1, 2, 3}, MessageStatus::complete, {}, {}});
  }
  SessionStore reopened(dir.layout());
  EXPECT_EQ(reopened.session(id).title, "kept");
  const auto messages = reopened.messages(id);
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0].token_ids, (std::vector<TokenId>{1, 2, 3}));
}

TEST(Schema, NewerVersionIsRefusedAndLeftUntouched) {
  TempDir dir;
  int64_t id;
  {
    SessionStore store(dir.layout());
    id = store.create_session("from the future", testing::test_settings());
  }
  {
    Database db = Database::open(dir.layout().database());
    db.exec("PRAGMA user_version = 99");
  }
  try {
    SessionStore store(dir.layout());
    FAIL() << "a version-99 database was opened";
  } catch (const FormatError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("schema version 99 is newer"), std::string::npos) << msg;
    EXPECT_NE(msg.find("sessions.sqlite"), std::string::npos) << msg;
  }
  EXPECT_THROW(TokenLog log(dir.layout().database()), FormatError);
  EXPECT_THROW(KvBlockStore blocks(dir.layout()), FormatError);
  Database db = Database::open(dir.layout().database());
  EXPECT_EQ(schema_version(db), 99);
  Query q = db.query("SELECT title FROM sessions WHERE id = ?1");
  ASSERT_TRUE(q.with(id).step());
  EXPECT_EQ(q.text(0), "from the future");
}

TEST(Schema, NotADatabaseIsAFormatErrorNamingTheFile) {
  TempDir dir;
  dir.layout().create_directories();
  {
    std::FILE* f = std::fopen(dir.layout().database().c_str(), "wb");
    std::fputs("this is not an SQLite database, just some text that is long enough....", f);
    std::fclose(f);
  }
  try {
    SessionStore store(dir.layout());
    FAIL() << "a text file was opened as a database";
  } catch (const FormatError& e) {
    EXPECT_EQ(e.file(), dir.layout().database().string());
  }
}

// tests/data/storage/sessions-v1.sqlite was made by make_sessions_v1.sh: the version-1 code
// imported sessions-v1.json, then an answer was left half-logged as a crash leaves it. Whatever
// later versions change, this file must open with its content intact.
TEST(Schema, CommittedVersion1FileOpensAndIsRepaired) {
  TempDir dir;
  dir.layout().create_directories();
  const std::filesystem::path fixture =
      std::filesystem::path(FD_SOURCE_DIR) / "tests/data/storage/sessions-v1.sqlite";
  std::filesystem::copy_file(fixture, dir.layout().database());

  SessionStore store(dir.layout(), {.repair = true});
  EXPECT_EQ(store.repair_report().answers_recovered, 1);
  EXPECT_EQ(store.repair_report().tokens_recovered, 2);
  const auto sessions = store.list_sessions();
  ASSERT_EQ(sessions.size(), 1u);
  const SessionInfo& s = sessions[0];
  EXPECT_EQ(s.title, "Fixture: a version 1 session");
  EXPECT_EQ(s.created_ms, 1700000000000);
  EXPECT_EQ(s.settings.model_fingerprint, "flash-tiny-fixture");
  EXPECT_EQ(s.settings.effort, 50);
  EXPECT_FALSE(s.settings.thinking);
  EXPECT_EQ(s.settings.sampling.seed, 42u);
  const auto messages = store.messages(s.id);
  ASSERT_EQ(messages.size(), 3u);
  EXPECT_EQ(messages[0].text, "What colour is the square?");
  ASSERT_EQ(messages[0].attachments.size(), 1u);
  EXPECT_EQ(messages[0].attachments[0].mime_type, "image/png");
  // The fixture holds no attachment files: the row is kept (at its old path) under a marker digest
  // the migration to version 2 derived from the old one.
  EXPECT_FALSE(messages[0].attachments[0].digest.is_zero());
  EXPECT_EQ(messages[0].attachments[0].path,
            dir.layout().attachments_dir() / "de/de4467f94e98c0a687c516f155bd62e4");
  EXPECT_EQ(messages[1].text, "Red.");
  EXPECT_EQ(messages[1].token_ids, (std::vector<TokenId>{5, 6, 7}));
  EXPECT_EQ(messages[1].status, MessageStatus::complete);
  // Version 2's columns: unknown for answers of version 1.
  EXPECT_EQ(messages[1].end.thinking_ms, -1);
  EXPECT_FALSE(messages[1].end.stopped);
  // A continued answer cut short: token 20 "It" was in the message, 21 " is" and 22 " red" only
  // in the log; folded, it stays interrupted.
  EXPECT_EQ(messages[2].status, MessageStatus::interrupted);
  EXPECT_EQ(messages[2].token_ids, (std::vector<TokenId>{20, 21, 22}));
  EXPECT_EQ(messages[2].text, "It is red");

  // Its KV block row names a file that is not there: the block store drops the row.
  KvBlockStore blocks(dir.layout(), {.repair = true});
  EXPECT_EQ(blocks.reconcile_report().rows_without_files, 1);
  EXPECT_EQ(blocks.stats().blocks, 0);
}

// tests/data/storage/sessions-v1-attachments/ was made by make_sessions_v1_attachments.sh with
// the version-1 code: two images named by XXH3-128, one attached to two messages. Opened now, the
// attachments are keyed and named by the SHA-256 of their bytes, every message still shows its
// images, and the files under the old names are removed by the repair as no row names them.
TEST(Schema, CommittedVersion1AttachmentsAreRekeyedBySha256) {
  TempDir dir;
  std::filesystem::copy(
      std::filesystem::path(FD_SOURCE_DIR) / "tests/data/storage/sessions-v1-attachments",
      dir.path(), std::filesystem::copy_options::recursive);
  const auto attachments = dir.layout().attachments_dir();
  const auto red = read_whole_file(attachments / "0e/0e7eb051d8c92a634f54b19f2e8f93c2");
  const auto blue = read_whole_file(attachments / "81/816fb7054b428fc87eac6e7cbbb866ed");
  {
    Database old = Database::open(dir.layout().database());
    ASSERT_EQ(old.scalar_int64("PRAGMA user_version"), 1);
  }

  SessionStore store(dir.layout(), {.repair = true});
  EXPECT_EQ(store.repair_report().orphan_files_removed, 2);  // the XXH3-named files
  EXPECT_FALSE(std::filesystem::exists(attachments / "0e/0e7eb051d8c92a634f54b19f2e8f93c2"));
  const auto sessions = store.list_sessions();
  ASSERT_EQ(sessions.size(), 1u);
  const auto messages = store.messages(sessions[0].id);
  ASSERT_EQ(messages.size(), 4u);
  ASSERT_EQ(messages[0].attachments.size(), 2u);
  ASSERT_EQ(messages[2].attachments.size(), 1u);
  const Attachment& r = messages[0].attachments[0];
  const Attachment& b = messages[0].attachments[1];
  EXPECT_EQ(r.digest, image_digest(red));
  EXPECT_EQ(b.digest, image_digest(blue));
  EXPECT_EQ(messages[2].attachments[0].digest, r.digest);  // still stored once
  EXPECT_EQ(r.path, attachments / r.digest.hex().substr(0, 2) / r.digest.hex());
  EXPECT_EQ(read_whole_file(r.path), red);
  EXPECT_EQ(read_whole_file(b.path), blue);
  EXPECT_EQ(r.byte_size, 73);
  EXPECT_TRUE(store.find_attachment(image_digest(blue)).has_value());
  Database db = Database::open(dir.layout().database());
  EXPECT_EQ(schema_version(db), kSchemaVersion);
  EXPECT_EQ(db.scalar_int64("SELECT COUNT(*) FROM attachments"), 2);
  EXPECT_EQ(db.scalar_int64("SELECT COUNT(*) FROM attachments WHERE length(digest) = 64"), 2);
}

}  // namespace
}  // namespace flashdesk::storage
