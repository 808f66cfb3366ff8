// The SSD KV block store on real files: round trips, sharing, verification, eviction, repair.
#include "storage/kv_block_store.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "kv_store_test_util.h"
#include "storage/kv_block_file.h"
#include "storage/session_store.h"

namespace flashdesk::storage {
namespace {

using namespace testing;
namespace fs = std::filesystem;

class KvStoreTest : public ::testing::Test {
 protected:
  KvBlockStoreOptions options() {
    KvBlockStoreOptions o;
    o.tokens_per_block = kTestBlockTokens;
    o.clock = clock.clock();
    return o;
  }
  fs::path file_of(const BlockKey& key) { return block_file_path(dir.layout().kv_dir(), key); }
  int64_t files_in_kv_dir() {
    int64_t n = 0;
    for (const auto& e : fs::recursive_directory_iterator(dir.layout().kv_dir()))
      n += e.is_regular_file();
    return n;
  }

  TempDir dir;
  ManualClock clock;
  SessionStore sessions{dir.layout()};  // creates and migrates the database
};

TEST_F(KvStoreTest, BlocksRoundTripAndCoverThePromptPrefix) {
  KvBlockStore store(dir.layout(), options());
  const auto prompt = prompt_tokens(1, 3 * kTestBlockTokens + 5);
  for (const WriteOutcome& o : spill(store, "model-A", prompt))
    EXPECT_EQ(o.status, WriteStatus::written) << o.message;
  const PrefixMatch m = store.match_prefix("model-A", prompt, {});
  EXPECT_EQ(m.covered_tokens, 3 * kTestBlockTokens);
  ASSERT_EQ(m.covered_keys.size(), 3u);
  EXPECT_EQ(m.all_keys, m.covered_keys);
  const auto reads = store.get(m.covered_keys);
  for (const BlockRead& r : reads) {
    ASSERT_EQ(r.status, ReadStatus::hit) << r.message;
    const auto expected = payload_for(r.key);
    EXPECT_TRUE(
        std::equal(r.payload().begin(), r.payload().end(), expected.begin(), expected.end()));
  }
  const KvStoreStats s = store.stats();
  EXPECT_EQ(s.blocks, 3);
  EXPECT_EQ(s.bytes,
            3 * static_cast<int64_t>(kBlockHeaderSize + kTestBlockTokens * kBytesPerToken));
  EXPECT_EQ(s.reads_hit, 3);
  EXPECT_EQ(files_in_kv_dir(), 3);
}

TEST_F(KvStoreTest, APromptSharingAPrefixReusesItsBlocks) {
  KvBlockStore store(dir.layout(), options());
  const auto first = prompt_tokens(2, 3 * kTestBlockTokens);
  spill(store, "model-A", first);
  auto second = first;
  second[2 * kTestBlockTokens + 1] ^= 1;  // differs in block 2
  second.resize(5 * kTestBlockTokens);
  const PrefixMatch m = store.match_prefix("model-A", second, {});
  EXPECT_EQ(m.covered_tokens, 2 * kTestBlockTokens);
  EXPECT_EQ(m.all_keys.size(), 5u);
  // Writing the second prompt stores only its three new blocks.
  const auto outcomes = spill(store, "model-A", second);
  EXPECT_EQ(outcomes[0].status, WriteStatus::already_stored);
  EXPECT_EQ(outcomes[1].status, WriteStatus::already_stored);
  EXPECT_EQ(outcomes[2].status, WriteStatus::written);
  EXPECT_EQ(store.stats().blocks, 6);
}

TEST_F(KvStoreTest, KeysMatchAcrossProcessesAndRestarts) {
  const auto prompt = prompt_tokens(3, 2 * kTestBlockTokens);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // another process writes the blocks
    int rc = 0;
    try {
      KvBlockStore store(dir.layout(), options());
      for (const auto& o : spill(store, "model-A", prompt)) rc |= o.status != WriteStatus::written;
    } catch (...) {
      rc = 2;
    }
    ::_exit(rc);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  KvBlockStore store(dir.layout(), options());
  EXPECT_EQ(store.match_prefix("model-A", prompt, {}).covered_tokens, 2 * kTestBlockTokens);
}

TEST_F(KvStoreTest, AChangedModelNeverReusesBlocks) {
  KvBlockStore store(dir.layout(), options());
  const auto prompt = prompt_tokens(4, 2 * kTestBlockTokens);
  spill(store, "model-A", prompt);
  const PrefixMatch other = store.match_prefix("model-A'", prompt, {});
  EXPECT_EQ(other.covered_tokens, 0);
  for (const BlockRead& r : store.get(other.all_keys)) EXPECT_EQ(r.status, ReadStatus::not_stored);
  EXPECT_EQ(store.match_prefix("model-A", prompt, {}).covered_tokens, 2 * kTestBlockTokens);
}

// Damages the file of block `index` of a stored 3-block prompt, then reads all three.
class DamagedBlockTest : public KvStoreTest {
 protected:
  void check_damage(const std::function<void(const fs::path&)>& damage, const std::string& why) {
    KvBlockStore store(dir.layout(), options());
    const auto prompt = prompt_tokens(5, 3 * kTestBlockTokens);
    spill(store, "model-A", prompt);
    const auto keys = store.match_prefix("model-A", prompt, {}).covered_keys;
    ASSERT_EQ(keys.size(), 3u);
    damage(file_of(keys[1]));
    const auto reads = store.get(keys);
    EXPECT_EQ(reads[0].status, ReadStatus::hit);
    EXPECT_EQ(reads[1].status, ReadStatus::corrupt);
    EXPECT_TRUE(reads[1].payload().empty());  // never handed out
    EXPECT_NE(reads[1].message.find(why), std::string::npos) << reads[1].message;
    EXPECT_EQ(reads[2].status, ReadStatus::hit);
    EXPECT_FALSE(fs::exists(file_of(keys[1])));  // deleted
    EXPECT_EQ(store.stats().reads_corrupt, 1);
    // The walk now stops before it: the planner recomputes from block 1 on.
    EXPECT_EQ(store.match_prefix("model-A", prompt, {}).covered_tokens, kTestBlockTokens);
    EXPECT_EQ(store.get(std::span(keys).subspan(1, 1))[0].status, ReadStatus::not_stored);
  }
};

void flip_bit(const fs::path& path, std::streamoff offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  char c;
  f.get(c);
  f.seekp(offset);
  f.put(static_cast<char>(c ^ 0x04));
}

TEST_F(DamagedBlockTest, BitFlipInThePayload) {
  check_damage([](const fs::path& p) { flip_bit(p, 5000); }, "payload checksum");
}

TEST_F(DamagedBlockTest, BitFlipInTheHeader) {
  check_damage([](const fs::path& p) { flip_bit(p, 60); }, "header checksum");
}

TEST_F(DamagedBlockTest, TruncatedFile) {
  check_damage([](const fs::path& p) { fs::resize_file(p, fs::file_size(p) - 890); },
               "the file holds");
}

TEST_F(DamagedBlockTest, FileReplacedByAnotherValidBlock) {
  check_damage(
      [this](const fs::path& p) {
        for (const auto& e : fs::recursive_directory_iterator(dir.layout().kv_dir()))
          if (e.is_regular_file() && e.path() != p) {
            fs::copy_file(e.path(), p, fs::copy_options::overwrite_existing);
            break;
          }
      },
      "key at offset 16");
}

TEST_F(KvStoreTest, EvictsLeastRecentlyUsedUnderTheDiskBudget) {
  KvBlockStoreOptions o = options();
  const int64_t block_bytes = kBlockHeaderSize + kTestBlockTokens * kBytesPerToken;
  o.disk_budget_bytes = static_cast<uint64_t>(2 * block_bytes);  // room for two blocks
  KvBlockStore store(dir.layout(), o);
  std::vector<std::vector<TokenId>> prompts;
  std::vector<BlockKey> keys;
  for (int i = 0; i < 4; ++i) {
    prompts.push_back(prompt_tokens(100 + i, kTestBlockTokens));
    keys.push_back(chain_block_keys("m", prompts[i], {}, kTestBlockTokens)[0]);
  }
  spill(store, "m", prompts[0]);  // t0
  clock.advance_ms(1000);
  spill(store, "m", prompts[1]);  // t1
  clock.advance_ms(1000);
  store.get(std::span(keys).first(1));  // p0 used at t2
  clock.advance_ms(1000);
  spill(store, "m", prompts[2]);  // t3: over budget, p1 is the least recently used
  EXPECT_TRUE(fs::exists(file_of(keys[0])));
  EXPECT_FALSE(fs::exists(file_of(keys[1])));
  clock.advance_ms(1000);
  store.get(std::span(keys).first(1));  // p0 used at t4
  clock.advance_ms(1000);
  spill(store, "m", prompts[3]);  // t5: p2 goes
  EXPECT_EQ(store.get(keys)[0].status, ReadStatus::hit);
  EXPECT_FALSE(fs::exists(file_of(keys[2])));
  EXPECT_TRUE(fs::exists(file_of(keys[3])));
  EXPECT_LE(store.stats().bytes, 2 * block_bytes);
}

TEST_F(KvStoreTest, EvictsBlocksUnusedForLongerThanTheRetention) {
  KvBlockStoreOptions o = options();
  o.retention = std::chrono::hours(72);
  KvBlockStore store(dir.layout(), o);
  const auto old_prompt = prompt_tokens(6, kTestBlockTokens);
  const auto used_prompt = prompt_tokens(7, kTestBlockTokens);
  spill(store, "m", old_prompt);
  spill(store, "m", used_prompt);
  clock.advance_ms(71 * 3600 * 1000);
  store.get(store.match_prefix("m", used_prompt, {}).covered_keys);  // used again
  EXPECT_EQ(store.evict().expired, 0);
  clock.advance_ms(2 * 3600 * 1000);  // 73 h after writing, 2 h after the last use
  const EvictionReport r = store.evict();
  EXPECT_EQ(r.expired, 1);
  EXPECT_EQ(store.match_prefix("m", old_prompt, {}).covered_tokens, 0);
  EXPECT_EQ(store.match_prefix("m", used_prompt, {}).covered_tokens, kTestBlockTokens);
}

TEST_F(KvStoreTest, BlocksWhoseParentIsGoneAreDropped) {
  KvBlockStore store(dir.layout(), options());
  const auto prompt = prompt_tokens(8, 4 * kTestBlockTokens);
  spill(store, "m", prompt);
  const auto keys = store.match_prefix("m", prompt, {}).covered_keys;
  flip_bit(file_of(keys[1]), 400);
  store.get(std::span(keys).subspan(1, 1));  // detected and deleted
  const EvictionReport r = store.evict();
  EXPECT_EQ(r.unreachable, 2);  // blocks 2 and 3 chained through block 1
  EXPECT_EQ(store.stats().blocks, 1);
  EXPECT_EQ(files_in_kv_dir(), 1);
}

TEST_F(KvStoreTest, StartUpRemovesOrphansAndRowsWithoutFiles) {
  const auto prompt = prompt_tokens(9, 3 * kTestBlockTokens);
  std::vector<BlockKey> keys;
  {
    KvBlockStore store(dir.layout(), options());
    spill(store, "m", prompt);
    keys = store.match_prefix("m", prompt, {}).covered_keys;
  }
  // As a crash or a user leaves things: a half-written temporary file, a block file nobody
  // indexed, a missing file, a file of the wrong size, and an unrelated file.
  const fs::path temp = file_of(keys[0]).string() + ".tmp-4242-0";
  std::ofstream(temp) << "half a block";
  const BlockKey stray = xxh3_128(as_bytes("stray"));
  fs::create_directories(file_of(stray).parent_path());
  std::ofstream(file_of(stray)) << "an orphan";
  fs::remove(file_of(keys[2]));
  fs::resize_file(file_of(keys[1]), 1000);
  const fs::path unrelated = dir.layout().kv_dir() / "README";
  std::ofstream(unrelated) << "not ours";

  {
    KvBlockStore not_owner(dir.layout(), options());  // repair off: touches nothing
    EXPECT_TRUE(fs::exists(temp));
  }
  KvBlockStoreOptions o = options();
  o.repair = true;
  KvBlockStore store(dir.layout(), o);
  const ReconcileReport& r = store.reconcile_report();
  EXPECT_EQ(r.temp_files, 1);
  EXPECT_EQ(r.orphan_files, 1);
  EXPECT_EQ(r.rows_without_files, 2);
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_FALSE(fs::exists(file_of(stray)));
  EXPECT_FALSE(fs::exists(file_of(keys[1])));
  EXPECT_TRUE(fs::exists(unrelated));
  EXPECT_EQ(store.stats().blocks, 1);
  EXPECT_EQ(store.match_prefix("m", prompt, {}).covered_tokens, kTestBlockTokens);
}

TEST_F(KvStoreTest, DeletingASessionErasesTheBlocksOnlyItUsed) {
  KvBlockStore store(dir.layout(), options());
  const int64_t a = sessions.create_session("a", test_settings());
  const int64_t b = sessions.create_session("b", test_settings());
  const auto shared = prompt_tokens(10, kTestBlockTokens);
  auto pa = shared, pb = shared;
  const auto ta = prompt_tokens(11, kTestBlockTokens), tb = prompt_tokens(12, kTestBlockTokens);
  pa.insert(pa.end(), ta.begin(), ta.end());
  pb.insert(pb.end(), tb.begin(), tb.end());
  spill(store, "m", pa, a);
  spill(store, "m", pb, b);  // block 0 already stored: linked to b too
  const EraseReport r = sessions.delete_session(a);
  EXPECT_EQ(r.blocks_removed, 1);
  EXPECT_EQ(store.match_prefix("m", pa, {}).covered_tokens, kTestBlockTokens);
  EXPECT_EQ(store.match_prefix("m", pb, {}).covered_tokens, 2 * kTestBlockTokens);
  // A block queued for a session deleted meanwhile is dropped, not left behind.
  const auto late = prompt_tokens(13, kTestBlockTokens);
  EXPECT_EQ(spill(store, "m", late, a)[0].status, WriteStatus::dropped);
  EXPECT_EQ(files_in_kv_dir(), 2);
}

TEST_F(KvStoreTest, RejectsMalformedBlocksAndDropsWhatTheQueueCannotHold) {
  KvBlockStoreOptions o = options();
  o.max_queued_bytes = 1000;
  KvBlockStore store(dir.layout(), o);
  BlockWrite w;
  w.key = xxh3_128(as_bytes("k"));
  w.model_fingerprint = "m";
  w.token_count = kTestBlockTokens - 1;
  w.payload = {1, 2, 3};
  EXPECT_THROW(store.put(w), InvalidRequest);
  w.token_count = kTestBlockTokens;
  w.model_fingerprint = std::string(129, 'x');
  EXPECT_THROW(store.put(w), InvalidRequest);
  w.model_fingerprint = "m";
  w.payload.assign(2000, 7);
  EXPECT_EQ(store.put(w).get().status, WriteStatus::dropped);
  EXPECT_EQ(store.stats().writes_failed, 1);
}

TEST_F(KvStoreTest, EveryReadMethodReturnsTheSameBytes) {
  const auto prompt = prompt_tokens(14, 8 * kTestBlockTokens);
  std::vector<BlockKey> keys;
  {
    KvBlockStore store(dir.layout(), options());
    spill(store, "m", prompt);
    keys = store.match_prefix("m", prompt, {}).covered_keys;
  }
  for (ReadMethod method : {ReadMethod::sequential, ReadMethod::thread_pool, ReadMethod::io_uring})
    for (bool direct : {false, true}) {
      KvBlockStoreOptions o = options();
      o.reader = {method, 3, 4, direct};
      std::unique_ptr<KvBlockStore> store;
      try {
        store = std::make_unique<KvBlockStore>(dir.layout(), o);
      } catch (const IoError& e) {  // io_uring not built in or refused by this kernel
        std::printf("skipping the io_uring reader here: %s\n", e.what());
        continue;
      }
      SCOPED_TRACE(std::string(store->reader_name()));
      for (const BlockRead& r : store->get(keys)) {
        ASSERT_EQ(r.status, ReadStatus::hit) << r.message;
        const auto expected = payload_for(r.key);
        EXPECT_TRUE(
            std::equal(r.payload().begin(), r.payload().end(), expected.begin(), expected.end()));
      }
    }
}

TEST_F(KvStoreTest, ConcurrentWritersAndReadersNeverSeeADamagedBlock) {
  KvBlockStore store(dir.layout(), options());
  std::vector<std::vector<TokenId>> prompts;
  for (int i = 0; i < 8; ++i) prompts.push_back(prompt_tokens(200 + i % 5, 4 * kTestBlockTokens));
  std::atomic<bool> writing{true};
  std::atomic<int64_t> hits{0}, bad{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w)
    threads.emplace_back([&, w] {
      for (int i = w; i < 8; i += 4) spill(store, "m", prompts[i]);  // prompts repeat: races
    });
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      while (writing) {
        const auto& p = prompts[static_cast<size_t>(r)];
        for (const BlockRead& read : store.get(store.match_prefix("m", p, {}).all_keys)) {
          if (read.status == ReadStatus::hit) {
            ++hits;
            if (!std::ranges::equal(read.payload(), payload_for(read.key))) ++bad;
          } else if (read.status != ReadStatus::not_stored) {
            ++bad;
          }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  for (int i = 0; i < 4; ++i) threads[i].join();
  writing = false;
  for (size_t i = 4; i < threads.size(); ++i) threads[i].join();
  EXPECT_EQ(bad, 0);
  EXPECT_GT(hits, 0);
  EXPECT_EQ(store.stats().blocks, 5 * 4);  // five distinct prompts of four blocks
  for (const auto& p : prompts)
    EXPECT_EQ(store.match_prefix("m", p, {}).covered_tokens, 4 * kTestBlockTokens);
}

}  // namespace
}  // namespace flashdesk::storage
