// A full disk during KV spill and token logging: the write fails cleanly, the caller is told,
// nothing corrupt remains and the store works again once there is room. The first test runs in a
// child process on a 1 MiB tmpfs in a private mount namespace, and is reported SKIPPED with the
// reason where the test may not mount one (not root, no CAP_SYS_ADMIN): it never passes without
// having filled a disk. The second runs everywhere under a file-size limit (RLIMIT_FSIZE), which
// only the block store part can use.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>

#include <fstream>

#include "child_process.h"
#include "kv_store_test_util.h"
#include "storage/kv_block_file.h"
#include "storage/session_store.h"
#include "storage/token_log.h"

namespace flashdesk::storage {
namespace {

using namespace testing;
namespace fs = std::filesystem;

constexpr int64_t kBlockTokens = 256;  // 228 KB blocks: four fill the 1 MiB tmpfs

// Fails the child's report with a message when `cond` is false.
#define CHILD_EXPECT(cond)                                             \
  do {                                                                 \
    if (!(cond)) child.report(std::string("failed: ") + #cond + "\n"); \
  } while (0)

bool mount_private_tmpfs(const fs::path& where, std::string& why) {
  if (::unshare(CLONE_NEWNS) != 0) return why = "unshare(CLONE_NEWNS) refused", false;
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return why = "cannot make mounts private", false;
  if (::mount("tmpfs", where.c_str(), "tmpfs", 0, "size=1m") != 0)
    return why = "mount -t tmpfs refused", false;
  return true;
}

int64_t temp_files(const fs::path& dir) {
  int64_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) n += is_temp_name(e.path());
  return n;
}

KvBlockStoreOptions block_options() {
  KvBlockStoreOptions o;
  o.tokens_per_block = kBlockTokens;
  return o;
}

// Spill into a full disk, check the store, free space, spill again.
void block_store_part(Child& child, const StorageLayout& layout,
                      const std::function<void()>& make_room) {
  SessionStore sessions(layout);
  KvBlockStore store(layout, block_options());
  const auto prompt = prompt_tokens(77, 4 * kBlockTokens);
  const auto outcomes = spill(store, "m", prompt);
  int64_t written = 0, full = 0;
  for (const auto& o : outcomes) {
    written += o.status == WriteStatus::written;
    full += o.status == WriteStatus::disk_full;
  }
  child.report("blocks: " + std::to_string(written) + " written, " + std::to_string(full) +
               " disk full\n");
  CHILD_EXPECT(full > 0);
  for (const auto& o : outcomes)
    if (o.status == WriteStatus::disk_full) CHILD_EXPECT(o.message.find("disk full") == 0);
  CHILD_EXPECT(store.stats().last_write_error.has_value());
  CHILD_EXPECT(temp_files(layout.kv_dir()) == 0);
  // Blocks are written in parallel, so the one that fitted need not be the first; a prefix match
  // covers only the leading run of written blocks.
  int64_t leading = 0;
  while (leading < static_cast<int64_t>(outcomes.size()) &&
         outcomes[leading].status == WriteStatus::written)
    ++leading;
  const PrefixMatch m = store.match_prefix("m", prompt, {});
  CHILD_EXPECT(m.covered_tokens == leading * kBlockTokens);
  for (const BlockRead& r : store.get(m.covered_keys)) {
    CHILD_EXPECT(r.status == ReadStatus::hit);
    CHILD_EXPECT(std::ranges::equal(r.payload(), payload_for(r.key, kBlockTokens)));
  }
  make_room();
  const auto again = spill(store, "m", prompt);
  CHILD_EXPECT(again.back().status == WriteStatus::written);
  if (again.back().status != WriteStatus::written)
    child.report("again: " + again.back().message + "\n");
  CHILD_EXPECT(store.match_prefix("m", prompt, {}).covered_tokens == 4 * kBlockTokens);
  CHILD_EXPECT(temp_files(layout.kv_dir()) == 0);
}

// The session database itself on the full disk: commits fail, tokens wait, nothing is lost. The
// database is open before the disk fills (its WAL index needs room to be created).
void token_log_part(Child& child, const StorageLayout& layout, const fs::path& filler) {
  SessionStore sessions(layout);
  const int64_t id = sessions.create_session("s", test_settings());
  TokenLog log(layout.database());
  const AnswerHandle a = log.begin_answer(id);
  {
    std::ofstream fill(filler, std::ios::binary);
    fill << std::string(1 << 20, 'x');  // as much as fits
  }
  std::vector<TokenId> ids(20000, 5);
  log.append(a, ids, std::string(200000, 'y'));
  bool failed = false;
  try {
    log.flush();
  } catch (const DiskFullError&) {
    failed = true;
  }
  child.report(std::string("token log: commit on a full disk ") +
               (failed ? "failed with DiskFullError" : "succeeded") +
               (log.last_error() ? "; shown: " + *log.last_error() : "") + "\n");
  CHILD_EXPECT(failed);
  CHILD_EXPECT(log.last_error().has_value());
  fs::remove(filler);
  log.append(a, std::vector<TokenId>{6}, "z");
  log.finish(a);
  CHILD_EXPECT(!log.last_error());
  const auto m = sessions.messages(id);
  CHILD_EXPECT(m.size() == 1 && m[0].token_ids.size() == 20001 && m[0].token_ids.back() == 6);
  CHILD_EXPECT(m.size() == 1 && m[0].text.size() == 200001);
  CHILD_EXPECT(m.size() == 1 && m[0].status == MessageStatus::complete);
}

// A per-process file-size limit: block files larger than 128 KiB fail with EFBIG.
void file_size_limit_part(Child& child, const StorageLayout& layout) {
  child.report("mode: RLIMIT_FSIZE of 128 KiB (block store only)\n");
  ::signal(SIGXFSZ, SIG_IGN);  // else the kernel kills the process instead of failing write()
  rlimit small{128 << 10, RLIM_INFINITY};
  ::setrlimit(RLIMIT_FSIZE, &small);
  block_store_part(child, layout, [] {
    rlimit big{RLIM_INFINITY, RLIM_INFINITY};
    ::setrlimit(RLIMIT_FSIZE, &big);
  });
}

TEST(DiskFull, SpillAndTokenLogFailCleanlyAndRecoverOnAFullTmpfs) {
  TempDir dir;
  const StorageLayout layout{dir.path() / "data", dir.path() / "cache"};
  layout.create_directories();

  // First choice: a real full file system.
  Child tmpfs([&](Child& child) {
    std::string why;
    if (!mount_private_tmpfs(layout.cache_dir, why)) {
      child.report("unavailable: " + why + "\n");
      return;
    }
    child.report("mode: tmpfs of 1 MiB\n");
    const fs::path filler = layout.cache_dir / "filler";
    {
      std::ofstream fill(filler, std::ios::binary);
      fill << std::string(600 << 10, 'x');  // room for one 228 KB block, not two
    }
    block_store_part(child, layout, [&] { fs::remove(filler); });
    // Then the session database on the same small tmpfs.
    fs::remove_all(layout.kv_dir());
    const StorageLayout on_tmpfs{layout.cache_dir / "db", layout.cache_dir / "db"};
    on_tmpfs.create_directories();
    token_log_part(child, on_tmpfs, filler);
  });
  const std::string report = tmpfs.read_all();
  const int status = tmpfs.wait();
  if (report.rfind("unavailable: ", 0) == 0)
    GTEST_SKIP() << "cannot mount a 1 MiB tmpfs here (" << report.substr(13, report.size() - 14)
                 << "); DiskFull.SpillUnderAFileSizeLimitFailsCleanlyAndRecovers covers the block "
                    "store only";
  std::printf("%s", report.c_str());
  EXPECT_EQ(report.rfind("mode: tmpfs of 1 MiB\n", 0), 0u) << report;
  EXPECT_NE(report.find("token log: commit on a full disk failed with DiskFullError"),
            std::string::npos)
      << report;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << report;
  EXPECT_EQ(report.find("failed:"), std::string::npos) << report;
  EXPECT_EQ(report.find("exception:"), std::string::npos) << report;
}

}  // namespace
}  // namespace flashdesk::storage

namespace flashdesk::storage {
namespace {

// The fallback mechanism, run on every machine (the test above uses it only without tmpfs).
TEST(DiskFull, SpillUnderAFileSizeLimitFailsCleanlyAndRecovers) {
  testing::TempDir dir;
  const StorageLayout layout = dir.layout();
  layout.create_directories();
  testing::Child limited([&](testing::Child& child) { file_size_limit_part(child, layout); });
  const std::string report = limited.read_all();
  const int status = limited.wait();
  std::printf("%s", report.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << report;
  EXPECT_EQ(report.find("failed:"), std::string::npos) << report;
  EXPECT_EQ(report.find("exception:"), std::string::npos) << report;
  EXPECT_NE(report.find("blocks: 0 written, 4 disk full"), std::string::npos) << report;
}

}  // namespace
}  // namespace flashdesk::storage
