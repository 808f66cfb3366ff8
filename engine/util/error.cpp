// Formats failed invariant checks; they are bugs, reported with location and abort.
#include "engine/util/error.h"

#include <cstdio>
#include <cstdlib>

namespace flashdesk {

void check_failed(const char* expr, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "FlashDesk internal error at %s:%d: check `%s` failed: %s\n", file, line,
               expr, msg.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace flashdesk
