// The server's API key: read from the command line or a file, and checked against a request's
// "Authorization: Bearer ..." header in time that does not depend on where they differ.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace flashdesk::server {

// The first line of `path`, trailing whitespace removed; IoError when unreadable, InvalidRequest
// when empty.
std::string read_api_key_file(const std::filesystem::path& path);

// True when `authorization` is "Bearer <key>". Compares every byte whatever the mismatch.
bool bearer_matches(std::string_view authorization, std::string_view key);

// Whether `host` is a loopback address (127.0.0.0/8, ::1, localhost): binding anything else
// needs an API key.
bool is_loopback(std::string_view host);

}  // namespace flashdesk::server
