// The cache panel's figures read from a PersistentChat's stores (SSD blocks, window pool). Called
// on the worker thread, between turns: the counts are SQL queries on the block index.
#pragma once

#include "storage/persistent_chat.h"
#include "ui/chat_service.h"

namespace flashdesk::ui {

CacheStats cache_stats_of(storage::PersistentChat& chat);

}  // namespace flashdesk::ui
