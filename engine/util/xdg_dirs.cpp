// XDG base folders from the environment.
#include "engine/util/xdg_dirs.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>

#include "engine/util/error.h"

namespace flashdesk {
namespace {

std::filesystem::path home_dir() {
  if (const char* home = std::getenv("HOME"); home && *home) return home;
  if (const passwd* pw = ::getpwuid(::getuid()); pw && pw->pw_dir && *pw->pw_dir) return pw->pw_dir;
  throw IoError(
      "cannot find a home folder: set HOME, XDG_DATA_HOME and XDG_CACHE_HOME, or pass --data-dir");
}

}  // namespace

std::filesystem::path xdg_dir(const char* variable, const char* fallback_under_home) {
  if (const char* v = std::getenv(variable); v && *v && std::filesystem::path(v).is_absolute())
    return v;
  return home_dir() / fallback_under_home;
}

std::filesystem::path flashdesk_cache_dir() {
  return xdg_dir("XDG_CACHE_HOME", ".cache") / "flashdesk";
}

}  // namespace flashdesk
