// The SIGBUS handler behind mapped_file_guard.h. The registry is a fixed table of lock-free
// atomics, because the handler may read only what is async-signal-safe; it is process-wide
// because a signal handler is.
#include "engine/util/mapped_file_guard.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>

namespace flashdesk {
namespace {

constexpr size_t kSlots = 4096;
constexpr size_t kPathBytes = 512;
constexpr uintptr_t kClaimed = 1;  // a slot being filled: not yet a mapping

struct Slot {
  std::atomic<uintptr_t> begin{0};  // 0: free
  std::atomic<size_t> size{0};
  char path[kPathBytes] = {};
};

Slot g_slots[kSlots];
struct sigaction g_previous {};

// Appends `text` to buf[*at..cap) (truncating), for a message built without allocating.
void append(char* buf, size_t cap, size_t* at, const char* text) {
  for (; *text != '\0' && *at + 1 < cap; ++text) buf[(*at)++] = *text;
}

void append_number(char* buf, size_t cap, size_t* at, uint64_t v) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (n > 0 && *at + 1 < cap) buf[(*at)++] = digits[--n];
}

void write_all(const char* text, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, text, n);
    if (w <= 0) return;
    text += w;
    n -= static_cast<size_t>(w);
  }
}

void on_sigbus(int signo, siginfo_t* info, void* context) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (const Slot& s : g_slots) {
    const uintptr_t begin = s.begin.load(std::memory_order_acquire);
    if (begin <= kClaimed || addr < begin || addr - begin >= s.size.load()) continue;
    char msg[1024];
    size_t at = 0;
    append(msg, sizeof msg, &at, "flashdesk: the model file ");
    append(msg, sizeof msg, &at, s.path);
    append(msg, sizeof msg, &at, " shrank or was replaced while in use (byte ");
    append_number(msg, sizeof msg, &at, addr - begin);
    append(msg, sizeof msg, &at, " of the ");
    append_number(msg, sizeof msg, &at, s.size.load());
    append(msg, sizeof msg, &at,
           " it had when opened can no longer be read); FlashDesk stops. Put the complete file "
           "back and open the model again.\n");
    write_all(msg, at);
    ::_exit(kMappedFileShrankExitCode);
  }
  // Not ours: hand the signal to the previous disposition; the faulting read repeats under it.
  ::sigaction(SIGBUS, &g_previous, nullptr);
  if (info->si_code <= 0) ::raise(signo);  // sent by kill(), not by a fault: send it again
  (void)context;
}

void install_handler() {
  struct sigaction sa {};
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  ::sigemptyset(&sa.sa_mask);
  ::sigaction(SIGBUS, &sa, &g_previous);
}

}  // namespace

void guard_mapping(const void* begin, size_t size, const std::filesystem::path& path) noexcept {
  static std::once_flag installed;
  std::call_once(installed, install_handler);
  for (Slot& s : g_slots) {
    uintptr_t expected = 0;
    if (!s.begin.compare_exchange_strong(expected, kClaimed)) continue;
    const std::string& name = path.native();
    const size_t n = std::min(name.size(), kPathBytes - 1);
    std::memcpy(s.path, name.data(), n);
    s.path[n] = '\0';
    s.size.store(size);
    s.begin.store(reinterpret_cast<uintptr_t>(begin), std::memory_order_release);
    return;
  }
}

void unguard_mapping(const void* begin) noexcept {
  const auto b = reinterpret_cast<uintptr_t>(begin);
  for (Slot& s : g_slots) {
    uintptr_t expected = b;
    if (s.begin.compare_exchange_strong(expected, kClaimed)) {
      s.size.store(0);
      s.begin.store(0, std::memory_order_release);
      return;
    }
  }
}

}  // namespace flashdesk
