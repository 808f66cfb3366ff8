// Running part of a test in a forked child: for crashes (SIGKILL), mount namespaces and resource
// limits that must not touch the test process. The child reports through a pipe.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <string_view>

namespace flashdesk::storage::testing {

// A child process with a pipe from the child to the parent.
class Child {
 public:
  // Runs `body` in a child; whatever it writes with report() arrives at the parent. The child
  // exits 0 when body returns, 3 when it throws (after reporting the exception).
  explicit Child(const std::function<void(Child&)>& body) {
    int fds[2];
    if (::pipe(fds) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ < 0) std::abort();
    if (pid_ == 0) {
      ::close(fds[0]);
      write_fd_ = fds[1];
      int rc = 0;
      try {
        body(*this);
      } catch (const std::exception& e) {
        report(std::string("exception: ") + e.what() + "\n");
        rc = 3;
      }
      ::_exit(rc);
    }
    ::close(fds[1]);
    read_fd_ = fds[0];
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      wait();
    }
    if (read_fd_ >= 0) ::close(read_fd_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // In the child: sends bytes to the parent.
  void report(const std::string& s) const {
    size_t done = 0;
    while (done < s.size()) {
      const ssize_t n = ::write(write_fd_, s.data() + done, s.size() - done);
      if (n <= 0) return;
      done += static_cast<size_t>(n);
    }
  }

  pid_t pid() const { return pid_; }
  int read_fd() const { return read_fd_; }

  // In the parent: everything the child reported, until it exits (or is killed).
  std::string read_all() {
    std::string out;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::read(read_fd_, buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  // In the parent: what the child reported until `needle` appeared in it, the child ended, or
  // `timeout_ms` passed without a report (a hung child fails the test instead of hanging it).
  std::string read_until(std::string_view needle, int timeout_ms = 20'000) {
    std::string out;
    char buf[256];
    while (out.find(needle) == std::string::npos) {
      pollfd p{read_fd_, POLLIN, 0};
      if (::poll(&p, 1, timeout_ms) <= 0) break;
      const ssize_t n = ::read(read_fd_, buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  // In the parent: waits and returns the raw wait status.
  int wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    reaped_ = true;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int read_fd_ = -1;
  int write_fd_ = -1;
  bool reaped_ = false;
};

}  // namespace flashdesk::storage::testing
