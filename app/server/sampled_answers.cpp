// The server's memory of its answers' sampled ids (sampled_answers.h).
#include "app/server/sampled_answers.h"

#include <cstring>
#include <system_error>

#include "engine/util/error.h"
#include "storage/digest.h"
#include "storage/file_util.h"

namespace flashdesk::server {

SampledAnswers::SampledAnswers(std::string model_fingerprint, std::filesystem::path folder,
                               std::chrono::milliseconds retention, size_t capacity)
    : fingerprint_(std::move(model_fingerprint)),
      folder_(std::move(folder)),
      capacity_(capacity < 1 ? 1 : capacity) {
  if (folder_.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(folder_, ec);
  if (ec) throw IoError(folder_.string() + ": cannot create the folder: " + ec.message());
  remove_old_files(retention);
}

// One file per answer: the model and the text name it, so another model's answers never match.
std::filesystem::path SampledAnswers::file_for(const std::string& text) const {
  std::string key = fingerprint_;
  key.push_back('\0');
  key += text;
  return folder_ / (storage::xxh3_128(storage::as_bytes(key)).hex() + ".ids");
}

void SampledAnswers::remove_old_files(std::chrono::milliseconds retention) {
  const auto oldest = std::filesystem::file_time_type::clock::now() - retention;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(folder_, ec)) {
    std::error_code e;
    const bool temp = storage::is_temp_name(entry.path());
    if (temp || entry.last_write_time(e) < oldest) std::filesystem::remove(entry.path(), e);
  }
}

void SampledAnswers::keep_in_memory(const std::string& text, std::vector<TokenId> ids) {
  auto it = entries_.find(text);
  if (it != entries_.end()) {
    lru_.erase(it->second.lru);
    entries_.erase(it);
  }
  lru_.push_front(text);
  entries_.emplace(text, Entry{std::move(ids), lru_.begin()});
  while (entries_.size() > capacity_) {
    entries_.erase(lru_.back());
    lru_.pop_back();
  }
}

void SampledAnswers::remember(const std::string& text, std::vector<TokenId> ids) {
  if (text.empty() || ids.empty()) return;
  if (!folder_.empty()) {
    const auto bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(ids.data()),
                                                ids.size() * sizeof(TokenId));
    try {
      storage::write_file_atomic(file_for(text), std::span(&bytes, 1), /*sync_folder=*/false);
    } catch (const Error&) {  // a cache: the answer renders from its text after a restart
    }
  }
  keep_in_memory(text, std::move(ids));
}

std::optional<std::vector<TokenId>> SampledAnswers::find(const std::string& text) {
  auto it = entries_.find(text);
  if (it != entries_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return it->second.ids;
  }
  if (folder_.empty() || text.empty()) return std::nullopt;
  std::vector<uint8_t> bytes;
  try {
    bytes = storage::read_whole_file(file_for(text));
  } catch (const Error&) {
    return std::nullopt;
  }
  if (bytes.empty() || bytes.size() % sizeof(TokenId) != 0) return std::nullopt;
  std::vector<TokenId> ids(bytes.size() / sizeof(TokenId));
  std::memcpy(ids.data(), bytes.data(), bytes.size());
  keep_in_memory(text, ids);
  return ids;
}

std::vector<ConversationMessage> SampledAnswers::with_sampled_ids(
    std::vector<ConversationMessage> messages) {
  for (ConversationMessage& m : messages)
    if (m.role == Role::kAssistant && m.sampled_ids.empty())
      if (auto ids = find(m.text)) m.sampled_ids = std::move(*ids);
  return messages;
}

}  // namespace flashdesk::server
