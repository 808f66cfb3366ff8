// A server's own KV tiers in a data folder (server_kv_stores.h).
#include "app/server/server_kv_stores.h"

#include "storage/session_store.h"

namespace flashdesk::server {

std::filesystem::path answers_dir(const storage::StorageLayout& layout) {
  return layout.cache_dir / "api-answers";
}

ServerKvStores::ServerKvStores(const storage::StorageLayout& layout,
                               storage::KvBlockStoreOptions blocks,
                               storage::WindowPoolOptions window_pool)
    : pool_(window_pool) {
  layout.create_directories();
  // The block index lives in the sessions' database: opening the store creates or migrates it.
  storage::SessionStore{layout, storage::SessionStoreOptions{.repair = false}};
  blocks.repair = false;
  blocks_ = std::make_unique<storage::KvBlockStore>(layout, blocks);
}

ServerKvStores::~ServerKvStores() = default;

}  // namespace flashdesk::server
