// The ids the server's answers were sampled as, found again by their text when a client resends
// the history: the rendering then repeats the KV those answers left (live, parked or on the SSD),
// where encoding the text afresh may give other ids (chat_template.h, prefix rule 2).
//
// Goals: a conversation keeps its cache hits after its live KV was evicted or the server restarted
// (with a folder: each answer's ids in a small file, named by a digest of the model and the text,
// removed after the KV blocks' retention). Bounded in memory (least recently used go first).
// Non-goals: answers another server wrote (they render from their text, as before); answers with
// no visible text (nothing to match).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <list>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/runtime/conversation.h"

namespace flashdesk::server {

class SampledAnswers {
 public:
  // `folder` empty: memory only. Files older than `retention` are removed at construction.
  SampledAnswers(std::string model_fingerprint, std::filesystem::path folder = {},
                 std::chrono::milliseconds retention = std::chrono::hours(72),
                 size_t capacity = 4096);

  // Remembers that the answer showing `text` was sampled as `ids` (every id: reasoning,
  // </think>, content, EOS). A disk error only loses the file (the answer renders from its text).
  void remember(const std::string& text, std::vector<TokenId> ids);
  // The ids of an answer this server wrote with exactly this text, if known.
  std::optional<std::vector<TokenId>> find(const std::string& text);
  // `messages` with every assistant message this server wrote given its sampled ids.
  std::vector<ConversationMessage> with_sampled_ids(std::vector<ConversationMessage> messages);

 private:
  struct Entry {
    std::vector<TokenId> ids;
    std::list<std::string>::iterator lru;  // position in lru_ (front: most recent)
  };
  std::filesystem::path file_for(const std::string& text) const;
  void keep_in_memory(const std::string& text, std::vector<TokenId> ids);
  void remove_old_files(std::chrono::milliseconds retention);

  std::string fingerprint_;
  std::filesystem::path folder_;
  size_t capacity_;
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string> lru_;
};

}  // namespace flashdesk::server
