// The rows of the token write-ahead log (tables `answers` and `answer_tokens`) and how they are
// folded into the message they belong to. Shared by the token log's writer, the session store's
// start-up repair and its readers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "storage/session_types.h"

namespace flashdesk::storage {

class Database;

// The concatenation of an answer's committed token groups.
struct LoggedContent {
  std::vector<TokenId> token_ids;
  std::string text;
  std::string thinking;
};

// The logged content of the answer writing into `message_id`, if one is open.
std::optional<LoggedContent> read_answer_log_for_message(Database& db, int64_t message_id);

// Appends the answer's logged content to its message, sets the status and how it ended, deletes
// the log rows. Returns the number of tokens folded. Call inside a transaction.
int64_t fold_answer(Database& db, int64_t answer_id, MessageStatus status, int64_t now_ms,
                    const AnswerEnd& end = {});

// Ids of every open answer (after a crash: the ones to fold).
std::vector<int64_t> open_answer_ids(Database& db);

}  // namespace flashdesk::storage
