// What a chat session is made of, as the session store, the UI and the JSON export see it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/runtime/sampler.h"
#include "storage/digest.h"

namespace flashdesk::storage {

using TokenId = int32_t;

enum class Role { user, assistant };
enum class MessageStatus { complete, interrupted };

std::string_view to_string(Role role);
std::string_view to_string(MessageStatus status);
std::optional<Role> parse_role(std::string_view s);
std::optional<MessageStatus> parse_status(std::string_view s);

// The settings a session was created with; a later turn may change them.
struct SessionSettings {
  std::string model_fingerprint;  // of the model the session's token ids belong to
  int effort = 75;                // reasoning effort 1..100 (presets: low 50, high 75, max 100)
  bool thinking = true;
  std::string system_prompt;
  SamplingParams sampling;
  int64_t max_new_tokens = 4096;

  // Throws InvalidRequest naming the field that is out of range.
  void validate() const;
};

struct SessionInfo {
  int64_t id = 0;
  std::string title;
  int64_t created_ms = 0;  // milliseconds since the Unix epoch
  int64_t updated_ms = 0;
  SessionSettings settings;
  int64_t message_count = 0;
};

struct Attachment {
  ImageDigest digest;
  std::string mime_type;
  int64_t byte_size = 0;
  std::filesystem::path path;  // absolute path of the stored file
};

// How an answer ended beyond its status, as the live view showed it.
struct AnswerEnd {
  int64_t thinking_ms = -1;  // how long its reasoning took; -1: unknown or none
  bool stopped = false;      // the user stopped it (status interrupted)
};

struct Message {
  int64_t id = 0;
  int64_t session_id = 0;
  int64_t ordinal = 0;  // 0, 1, 2... within the session
  Role role = Role::user;
  std::string text;
  std::string thinking;
  std::vector<TokenId> token_ids;
  MessageStatus status = MessageStatus::complete;
  AnswerEnd end;  // answers
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  std::vector<Attachment> attachments;  // in the order the user attached them
};

struct NewImage {
  std::vector<uint8_t> bytes;  // the file as dropped (PNG, JPEG...), stored once per digest
  std::string mime_type;
};

struct NewMessage {
  Role role = Role::user;
  std::string text;
  std::string thinking;
  std::vector<TokenId> token_ids;
  MessageStatus status = MessageStatus::complete;
  std::vector<NewImage> images;
  AnswerEnd end;  // answers
};

// A whole session as exported to / imported from JSON (session_json.h): no ids, images inline.
struct ExportedMessage {
  NewMessage message;
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
};

struct SessionExport {
  std::string title;
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  SessionSettings settings;
  std::vector<ExportedMessage> messages;
};

// The digest the store files an image under (SHA-256: a crafted image must not be able to pass
// for another); the prefix planner puts the same digest in block keys.
ImageDigest image_digest(std::span<const uint8_t> image_bytes);

// Token ids as stored in BLOB columns: little-endian int32.
std::vector<uint8_t> encode_token_ids(std::span<const TokenId> ids);
// Throws FormatError naming `where` when the blob is not a whole number of int32.
std::vector<TokenId> decode_token_ids(std::span<const uint8_t> blob, std::string_view where);

}  // namespace flashdesk::storage
