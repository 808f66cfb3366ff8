// Session export/import: round trip through JSON, and a clear error for each kind of bad input.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>

#include "storage/session_json.h"
#include "storage/session_store.h"
#include "storage_test_util.h"

namespace flashdesk::storage {
namespace {

using testing::TempDir;

SessionExport sample_export() {
  SessionExport s;
  s.title = "Colours \"quoted\" 和 unicode";
  s.created_ms = 1700000000000;
  s.updated_ms = 1700000005000;
  s.settings = testing::test_settings();
  NewMessage user{Role::user, "What is this?", "", {1, 2, 3}, MessageStatus::complete, {}, {}};
  user.images.push_back({testing::pattern_bytes(7, 1234), "image/jpeg"});
  s.messages.push_back({user, 1700000001000, 1700000001000});
  NewMessage answer{Role::assistant,
                    "A square.",
                    "looking at pixels",
                    {4, 5},
                    MessageStatus::interrupted,
                    {},
                    {}};
  answer.end = AnswerEnd{.thinking_ms = 2500, .stopped = true};
  s.messages.push_back({answer, 1700000002000, 1700000003000});
  return s;
}

void expect_same(const SessionExport& a, const SessionExport& b) {
  EXPECT_EQ(a.title, b.title);
  EXPECT_EQ(a.created_ms, b.created_ms);
  EXPECT_EQ(a.updated_ms, b.updated_ms);
  EXPECT_EQ(a.settings.model_fingerprint, b.settings.model_fingerprint);
  EXPECT_EQ(a.settings.effort, b.settings.effort);
  EXPECT_EQ(a.settings.thinking, b.settings.thinking);
  EXPECT_EQ(a.settings.system_prompt, b.settings.system_prompt);
  EXPECT_EQ(a.settings.sampling.temperature, b.settings.sampling.temperature);
  EXPECT_EQ(a.settings.sampling.top_p, b.settings.sampling.top_p);
  EXPECT_EQ(a.settings.sampling.seed, b.settings.sampling.seed);
  EXPECT_EQ(a.settings.max_new_tokens, b.settings.max_new_tokens);
  ASSERT_EQ(a.messages.size(), b.messages.size());
  for (size_t i = 0; i < a.messages.size(); ++i) {
    const NewMessage &x = a.messages[i].message, &y = b.messages[i].message;
    EXPECT_EQ(x.role, y.role);
    EXPECT_EQ(x.text, y.text);
    EXPECT_EQ(x.thinking, y.thinking);
    EXPECT_EQ(x.token_ids, y.token_ids);
    EXPECT_EQ(x.status, y.status);
    EXPECT_EQ(x.end.thinking_ms, y.end.thinking_ms);
    EXPECT_EQ(x.end.stopped, y.end.stopped);
    EXPECT_EQ(a.messages[i].created_ms, b.messages[i].created_ms);
    EXPECT_EQ(a.messages[i].updated_ms, b.messages[i].updated_ms);
    ASSERT_EQ(x.images.size(), y.images.size());
    for (size_t k = 0; k < x.images.size(); ++k) {
      EXPECT_EQ(x.images[k].bytes, y.images[k].bytes);
      EXPECT_EQ(x.images[k].mime_type, y.images[k].mime_type);
    }
  }
}

TEST(SessionJson, RoundTripsThroughJsonAndTheStore) {
  const SessionExport original = sample_export();
  const std::string text = session_to_json(original);
  expect_same(session_from_json(text, "a.json"), original);

  TempDir dir;
  SessionStore store(dir.layout());
  const int64_t id = store.import_session(session_from_json(text, "a.json"));
  expect_same(store.export_session(id), original);
  const int64_t again = store.import_session(store.export_session(id));  // a copy
  EXPECT_NE(again, id);
  EXPECT_EQ(store.list_sessions().size(), 2u);
}

TEST(SessionJson, ExportNamesTheFormatAndTheImageSha256) {
  const auto doc = nlohmann::json::parse(session_to_json(sample_export()));
  EXPECT_EQ(doc["format"], "flashdesk-session");
  EXPECT_EQ(doc["version"], 2);
  const std::string digest = doc["messages"][0]["attachments"][0]["digest"];
  EXPECT_EQ(digest, image_digest(testing::pattern_bytes(7, 1234)).hex());
  EXPECT_EQ(digest.size(), 64u);
}

// Files exported by version 1 (images named by XXH3-128) still import, checked by that digest.
TEST(SessionJson, Version1ExportsStillImport) {
  auto doc = nlohmann::json::parse(session_to_json(sample_export()));
  doc["version"] = 1;
  doc["messages"][0]["attachments"][0]["digest"] = xxh3_128(testing::pattern_bytes(7, 1234)).hex();
  expect_same(session_from_json(doc.dump(), "v1.json"), sample_export());
  doc["messages"][0]["attachments"][0]["digest"] =
      image_digest(testing::pattern_bytes(7, 1234)).hex();
  try {
    session_from_json(doc.dump(), "v1.json");
    FAIL() << "a version-1 file with a SHA-256 digest was accepted";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("digest: does not match the data (XXH3-128 "),
              std::string::npos)
        << e.what();
  }
}

TEST(SessionJson, FilesOverTheLimitAreRefusedBeforeReading) {
  TempDir dir;
  const auto file = dir.path() / "huge.json";
  {
    std::ofstream out(file, std::ios::binary);
    out.seekp(static_cast<std::streamoff>(kMaxSessionFileBytes));  // a hole: no disk used
    out.put('}');
  }
  try {
    read_session_file(file);
    FAIL() << "a file over the limit was read";
  } catch (const FormatError& e) {
    EXPECT_EQ(std::string(e.what()),
              file.string() + ": is " + std::to_string(kMaxSessionFileBytes + 1) +
                  " bytes; a session file may hold at most 256 MiB (the whole file is read into "
                  "memory to be checked before anything is stored)");
  }
  // The same limit on text handed over directly.
  EXPECT_THROW(session_from_json(std::string(kMaxSessionFileBytes + 1, ' '), "t.json"),
               FormatError);
  // A file at the limit or under it is read (and then parsed as usual).
  const std::string text = session_to_json(sample_export());
  std::ofstream(dir.path() / "ok.json", std::ios::binary) << text;
  expect_same(session_from_json(read_session_file(dir.path() / "ok.json"), "ok.json"),
              sample_export());
  EXPECT_THROW(read_session_file(dir.path() / "missing.json"), IoError);
}

// Applies `edit` to a valid export and expects import to fail naming `field`.
void expect_error(const std::function<void(nlohmann::json&)>& edit, const std::string& field) {
  auto doc = nlohmann::json::parse(session_to_json(sample_export()));
  edit(doc);
  try {
    session_from_json(doc.dump(), "bad.json");
    FAIL() << "accepted an export with a bad " << field;
  } catch (const FormatError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("bad.json: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(field), std::string::npos) << "expected '" << field << "' in: " << msg;
  }
}

TEST(SessionJson, RejectsBadFieldsNamingThem) {
  using J = nlohmann::json;
  expect_error([](J& d) { d["format"] = "other"; }, "format");
  expect_error([](J& d) { d["version"] = 3; }, "version: 3 is newer than this FlashDesk reads (2)");
  expect_error([](J& d) { d.erase("title"); }, ".title: missing");
  expect_error([](J& d) { d["title"] = 5; }, "title: expected a string");
  expect_error([](J& d) { d["settings"]["effort"] = 0; }, "settings.effort: 0 is outside 1..100");
  expect_error([](J& d) { d["settings"]["thinking"] = "yes"; }, "settings.thinking");
  expect_error([](J& d) { d["settings"]["top_p"] = 2.0; }, "settings: top_p");
  expect_error([](J& d) { d["settings"]["seed"] = -1; }, "settings.seed");
  expect_error([](J& d) { d["messages"] = J::object(); }, "messages: expected an array");
  expect_error([](J& d) { d["messages"][1]["role"] = "system"; }, "messages[1].role");
  expect_error([](J& d) { d["messages"][0]["status"] = "done"; }, "messages[0].status");
  expect_error([](J& d) { d["messages"][0]["token_ids"][1] = -5; }, "messages[0].token_ids[1]");
  expect_error([](J& d) { d["messages"][0]["token_ids"][0] = 1.5; }, "messages[0].token_ids[0]");
  expect_error([](J& d) { d["messages"][0]["token_ids"][0] = 4294967296ull; },
               "messages[0].token_ids[0]");
  expect_error([](J& d) { d["messages"][0]["attachments"][0]["data"] = "!!!!"; },
               "messages[0].attachments[0].data: not valid base64");
  expect_error([](J& d) { d["messages"][0]["attachments"][0]["digest"] = "00"; },
               "messages[0].attachments[0].digest: does not match");
  expect_error([](J& d) { d["messages"][0]["created_ms"] = -1; }, "messages[0].created_ms");
  expect_error([](J& d) { d["messages"][1]["thinking_ms"] = -2; }, "messages[1].thinking_ms");
  expect_error([](J& d) { d["messages"][1]["stopped"] = "no"; }, "messages[1].stopped");
}

TEST(SessionJson, ExportsWithoutHowAnswersEndedStillImport) {
  // Exports written before the thinking time and the stop were kept have neither field.
  nlohmann::json doc = nlohmann::json::parse(session_to_json(sample_export()));
  for (auto& m : doc["messages"]) {
    m.erase("thinking_ms");
    m.erase("stopped");
  }
  const SessionExport s = session_from_json(doc.dump(), "old.json");
  EXPECT_EQ(s.messages[1].message.end.thinking_ms, -1);
  EXPECT_FALSE(s.messages[1].message.end.stopped);
}

TEST(SessionJson, RejectsWhatIsNotJson) {
  // The last overflows a double: the JSON library throws out_of_range, found by the fuzzer.
  for (const char* text : {"", "{", "[1, 2]", "null", "{\"format\": \"flashdesk-session\"",
                           "\xff\xfe garbage", "{\"version\": 42e4467}"})
    EXPECT_THROW(session_from_json(text, "x.json"), FormatError) << text;
}

TEST(SessionJson, FailedImportLeavesNothingBehind) {
  TempDir dir;
  SessionStore store(dir.layout());
  SessionExport bad = sample_export();
  bad.settings.effort = 0;
  EXPECT_THROW(store.import_session(bad), InvalidRequest);
  EXPECT_TRUE(store.list_sessions().empty());
}

}  // namespace
}  // namespace flashdesk::storage
