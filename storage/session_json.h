// Sessions as JSON files: the export/import format of `flashdesk-cli sessions export|import` and
// of the app. Self-contained: images are inline (base64) with their digest, which import checks.
// Files are read whole and checked before anything is stored, so they are limited to
// kMaxSessionFileBytes (a larger one is a FormatError saying so).
// Format (version 2; version 1, still imported, named images by their XXH3-128, 32 hex digits):
//   {"format": "flashdesk-session", "version": 1, "title": "...", "created_ms": 0,
//    "updated_ms": 0, "settings": {"model_fingerprint": "...", "effort": 75, "thinking": true,
//    "system_prompt": "...", "temperature": 0.0, "top_p": 1.0, "seed": 0, "max_new_tokens": 4096},
//    "messages": [{"role": "user"|"assistant", "text": "...", "thinking": "...",
//      "token_ids": [1, 2], "status": "complete"|"interrupted", "created_ms": 0, "updated_ms": 0,
//      "attachments": [{"digest": "<SHA-256, 64 hex>", "mime_type": "image/png",
//                       "data": "<base64>"}]}]}
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "storage/session_types.h"

namespace flashdesk::storage {

inline constexpr std::string_view kSessionFormatName = "flashdesk-session";
inline constexpr int kSessionFormatVersion = 2;
inline constexpr uint64_t kMaxSessionFileBytes = uint64_t{256} << 20;

std::string session_to_json(const SessionExport& session);

// Parses and validates every field. Throws FormatError naming `source` (a file name) and the
// field, e.g. "messages[2].role: expected \"user\" or \"assistant\"".
SessionExport session_from_json(std::string_view text, const std::string& source);

// The text of a session file to import; a file over kMaxSessionFileBytes is refused before it is
// read (FormatError naming it and both sizes), one that cannot be read is an IoError.
std::string read_session_file(const std::filesystem::path& file);

}  // namespace flashdesk::storage
