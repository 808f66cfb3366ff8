// Typed errors for bad outside data (files, user input), caught at the engine API and shown.
#pragma once

#include <stdexcept>
#include <string>

namespace flashdesk {

// Base of every error the user may see. A broken internal invariant is not an Error: it is a bug
// and fails an assertion (FD_CHECK) instead.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A file (or a part of one) is malformed: names the file and the field, tensor or offset.
class FormatError : public Error {
 public:
  FormatError(const std::string& file, const std::string& what)
      : Error(file.empty() ? what : file + ": " + what), file_(file) {}
  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

// A file cannot be opened, read or written.
class IoError : public Error {
 public:
  using Error::Error;
};

// A request the engine cannot serve (prompt too long, id out of range, bad option value).
class InvalidRequest : public Error {
 public:
  using Error::Error;
};

[[noreturn]] void check_failed(const char* expr, const char* file, int line,
                               const std::string& msg);

}  // namespace flashdesk

// Invariant check that stays on in release builds: the model code is cheap to check per call,
// and a wrong shape deep in a kernel is far harder to find than a message naming it.
#define FD_CHECK(cond, msg)                                                   \
  do {                                                                        \
    if (!(cond)) ::flashdesk::check_failed(#cond, __FILE__, __LINE__, (msg)); \
  } while (0)
