// A checkpoint file truncated under a loaded model: a file small enough to be copied at open keeps
// answering exactly as before; a mapped one stops the process with a message naming the file
// (mapped_file_guard.h) instead of an unexplained SIGBUS crash. Real files, a real model.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>

#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/random_checkpoint.h"
#include "engine/model/model.h"
#include "engine/ops/cpu/cpu_backend.h"
#include "engine/util/mapped_file.h"
#include "engine/util/mapped_file_guard.h"
#include "tests/engine/checkpoint_test_util.h"
#include "tests/engine/model_test_util.h"

namespace flashdesk {
namespace {

using testing::TempDir;

// A model directory of the every-role config whose model.safetensors this test may damage.
void write_model(const TempDir& dir) {
  write_random_checkpoint(testing::config_asset("test-every-role.json"), dir.path(),
                          testing::random_options(21));
}

CheckpointOptions open_options(uint64_t copy_limit) {
  CheckpointOptions o;
  o.copy_files_up_to = copy_limit;
  o.digest_cache.clear();
  return o;
}

std::vector<float> prefill_logits(Model& model, const std::vector<int32_t>& prompt) {
  SequenceState s = model.new_sequence();
  return model.prefill(s, prompt, PrefillOptions{PrefillMode::Exact, 0, false});
}

void truncate_file(const std::filesystem::path& file, off_t size) {
  ASSERT_EQ(::truncate(file.c_str(), size), 0) << file;
}

TEST(TruncatedCheckpoint, CopiedFileKeepsAnsweringTheSame) {
  TempDir dir;
  write_model(dir);
  CpuReferenceBackend backend(2);
  Model model(Checkpoint::open(dir.path(), open_options(kDefaultCopyLimit)), backend);
  const auto prompt = test::test_prompt(40, model.config().text.vocab_size);
  const std::vector<float> before = prefill_logits(model, prompt);
  truncate_file(dir / "model.safetensors", 100);
  EXPECT_EQ(prefill_logits(model, prompt), before);
}

struct ChildResult {
  int status = 0;
  std::string stderr_text;
};

// Runs `body` in a child process whose stderr is captured.
ChildResult run_in_child(const std::function<void()>& body) {
  int fds[2];
  if (::pipe(fds) != 0) std::abort();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ::dup2(fds[1], STDERR_FILENO);
    body();
    ::_exit(0);
  }
  ::close(fds[1]);
  ChildResult r;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) r.stderr_text.append(buf, size_t(n));
  ::close(fds[0]);
  ::waitpid(pid, &r.status, 0);
  return r;
}

TEST(TruncatedCheckpoint, MappedFileStopsWithAMessageNamingIt) {
  TempDir dir;
  write_model(dir);
  const auto file = dir / "model.safetensors";
  const ChildResult r = run_in_child([&] {
    CpuReferenceBackend backend(2);
    Model model(Checkpoint::open(dir.path(), open_options(0)), backend);
    const auto prompt = test::test_prompt(40, model.config().text.vocab_size);
    prefill_logits(model, prompt);  // every weight page read once
    if (::truncate(file.c_str(), 4096) != 0) ::_exit(3);
    prefill_logits(model, prompt);
  });
  ASSERT_TRUE(WIFEXITED(r.status)) << "ended by signal " << WTERMSIG(r.status) << "\n"
                                   << r.stderr_text;
  EXPECT_EQ(WEXITSTATUS(r.status), kMappedFileShrankExitCode) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("flashdesk: the model file " + file.string() +
                               " shrank or was replaced while in use"),
            std::string::npos)
      << r.stderr_text;
}

TEST(TruncatedCheckpoint, OtherSigbusIsNotSwallowed) {
  TempDir dir;
  testing::write_text(dir / "a.bin", std::string(10000, 'x'));
  const ChildResult r = run_in_child([&] {
    const MappedFile guarded(dir / "a.bin", 0);  // installs the handler
    ::raise(SIGBUS);                             // not a fault in a guarded mapping
  });
  EXPECT_TRUE(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGBUS) << r.stderr_text;
  EXPECT_EQ(r.stderr_text.find("flashdesk: the model file"), std::string::npos);
}

}  // namespace
}  // namespace flashdesk
