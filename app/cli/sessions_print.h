// How `flashdesk-cli sessions` prints sessions: aligned text for people, JSON for scripts.
#pragma once

#ifdef FLASHDESK_HAVE_STORAGE

#include <vector>

#include "storage/session_types.h"

namespace flashdesk::cli {

void print_session_list(const std::vector<storage::SessionInfo>& sessions, bool json);
void print_session(const storage::SessionInfo& session,
                   const std::vector<storage::Message>& messages, bool json);

}  // namespace flashdesk::cli

#endif  // FLASHDESK_HAVE_STORAGE
