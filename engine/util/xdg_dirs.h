// The XDG base folders (data, cache) that FlashDesk's files live under by default.
#pragma once

#include <filesystem>

namespace flashdesk {

// $variable when it is set to an absolute path (the XDG spec ignores relative ones), else
// $HOME/fallback_under_home (the password database's home when HOME is unset). Throws IoError
// when there is no home folder either.
std::filesystem::path xdg_dir(const char* variable, const char* fallback_under_home);

// $XDG_CACHE_HOME/flashdesk, else ~/.cache/flashdesk.
std::filesystem::path flashdesk_cache_dir();

}  // namespace flashdesk
