// The server's memory of its answers' sampled ids: found by their exact text, kept across a
// restart in its folder, apart per model, bounded in memory.
#include "app/server/sampled_answers.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <string>

namespace flashdesk::server {
namespace {

struct Folder {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("flashdesk-sampled-answers-" + std::to_string(::getpid()));
  Folder() { std::filesystem::remove_all(path); }
  ~Folder() { std::filesystem::remove_all(path); }
};

ConversationMessage assistant(std::string text) {
  ConversationMessage m;
  m.role = Role::kAssistant;
  m.text = std::move(text);
  return m;
}

TEST(SampledAnswers, FindsAnAnswerByItsExactText) {
  SampledAnswers answers("model-a");
  answers.remember("Nice to meet you, Quinn!", {5, 6, 7, 1});
  EXPECT_EQ(answers.find("Nice to meet you, Quinn!"), (std::vector<TokenId>{5, 6, 7, 1}));
  EXPECT_FALSE(answers.find("Nice to meet you, Quinn"));
  answers.remember("", {9});  // nothing to match an empty answer by
  EXPECT_FALSE(answers.find(""));

  std::vector<ConversationMessage> messages = {user_turn("Nice to meet you, Quinn!"),
                                               assistant("Nice to meet you, Quinn!"),
                                               assistant("Something else")};
  messages = answers.with_sampled_ids(messages);
  EXPECT_TRUE(messages[0].sampled_ids.empty()) << "user messages are the client's text";
  EXPECT_EQ(messages[1].sampled_ids, (std::vector<TokenId>{5, 6, 7, 1}));
  EXPECT_TRUE(messages[2].sampled_ids.empty());
}

TEST(SampledAnswers, KeptInTheFolderAcrossARestartForTheSameModelOnly) {
  Folder folder;
  SampledAnswers("model-a", folder.path).remember("42", {11, 12, 1});
  EXPECT_EQ(SampledAnswers("model-a", folder.path).find("42"), (std::vector<TokenId>{11, 12, 1}));
  EXPECT_FALSE(SampledAnswers("model-b", folder.path).find("42"));
  EXPECT_FALSE(SampledAnswers("model-a").find("42")) << "memory only without a folder";
}

TEST(SampledAnswers, OldFilesGoAtStart) {
  Folder folder;
  SampledAnswers("model-a", folder.path).remember("42", {11, 12, 1});
  EXPECT_FALSE(SampledAnswers("model-a", folder.path, std::chrono::milliseconds(-1)).find("42"));
  EXPECT_TRUE(std::filesystem::is_empty(folder.path));
}

TEST(SampledAnswers, MemoryKeepsTheMostRecentlyUsed) {
  SampledAnswers answers("model-a", {}, std::chrono::hours(72), 2);
  answers.remember("one", {1});
  answers.remember("two", {2});
  EXPECT_TRUE(answers.find("one"));  // now the most recent
  answers.remember("three", {3});
  EXPECT_TRUE(answers.find("one"));
  EXPECT_FALSE(answers.find("two"));
  EXPECT_TRUE(answers.find("three"));
}

}  // namespace
}  // namespace flashdesk::server
