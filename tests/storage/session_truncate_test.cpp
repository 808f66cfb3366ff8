// Cutting a session short for a regenerated answer: later messages and their token log go, the
// earlier ones stay, the next message takes the freed ordinal.
#include <gtest/gtest.h>

#include "storage/session_store.h"
#include "storage/token_log.h"
#include "storage_test_util.h"

namespace flashdesk::storage {
namespace {

using testing::TempDir;
using testing::test_settings;

NewMessage text_message(Role role, std::string text) {
  return {role, std::move(text), "", {1, 2, 3}, MessageStatus::complete, {}, {}};
}

TEST(SessionTruncate, DeletesTheMessagesFromAnOrdinalOn) {
  TempDir dir;
  SessionStore store(dir.layout());
  const int64_t s = store.create_session("chat", test_settings());
  const int64_t other = store.create_session("other", test_settings());
  store.append_message(s, text_message(Role::user, "q1"));
  store.append_message(s, text_message(Role::assistant, "a1"));
  store.append_message(s, text_message(Role::user, "q2"));
  store.append_message(other, text_message(Role::user, "elsewhere"));
  {
    TokenLog log(dir.layout().database());
    const AnswerHandle answer = log.begin_answer(s);  // ordinal 3, still being logged
    log.append(answer, std::vector<TokenId>{7, 8}, "a2 so far");
    log.flush();
  }
  ASSERT_EQ(store.messages(s).size(), 4u);

  EXPECT_EQ(store.delete_messages_from(s, 2), 2);  // q2 and the logged answer
  const auto kept = store.messages(s);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].text, "q1");
  EXPECT_EQ(kept[1].text, "a1");
  EXPECT_EQ(store.messages(other).size(), 1u);
  EXPECT_EQ(store.session(s).message_count, 2);
  EXPECT_TRUE(store.search("a2 so far").empty());

  store.append_message(s, text_message(Role::user, "q2 again"));
  EXPECT_EQ(store.messages(s).back().ordinal, 2);
  EXPECT_EQ(store.delete_messages_from(s, 10), 0);
  EXPECT_THROW(store.delete_messages_from(999, 0), InvalidRequest);
}

}  // namespace
}  // namespace flashdesk::storage
