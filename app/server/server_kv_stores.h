// The KV tiers of a server that has no stored sessions of its own (`flashdesk-cli serve`): the
// SSD block store of a data folder and a DRAM window pool. The folder is the one `chat --session`
// and the app use by default, so blocks are shared by content with their sessions; the server
// opens it as a guest (it never repairs: the owner of the folder's lock does).
#pragma once

#include <filesystem>
#include <memory>

#include "app/server/conversation_cache.h"
#include "storage/kv_block_store.h"
#include "storage/storage_layout.h"
#include "storage/window_pool.h"

namespace flashdesk::server {

// Where a server keeps the ids of its answers (sampled_answers.h): beside the KV blocks, a cache.
std::filesystem::path answers_dir(const storage::StorageLayout& layout);

class ServerKvStores {
 public:
  // Creates the folders and migrates the database as needed. IoError, FormatError (a database of
  // a newer FlashDesk) as for the sessions' store.
  ServerKvStores(const storage::StorageLayout& layout, storage::KvBlockStoreOptions blocks,
                 storage::WindowPoolOptions window_pool = {});
  ~ServerKvStores();

  KvTiers tiers() { return {.blocks = blocks_.get(), .window_pool = &pool_}; }
  storage::KvBlockStore& blocks() { return *blocks_; }

 private:
  std::unique_ptr<storage::KvBlockStore> blocks_;
  storage::WindowPool pool_;
};

}  // namespace flashdesk::server
