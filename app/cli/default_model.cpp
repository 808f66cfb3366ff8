// Finding the bundled demo model; the two folders come from CMake (app/CMakeLists.txt).
#include "app/cli/default_model.h"

#include <filesystem>

namespace flashdesk::cli {

std::string default_model_dir() {
  for (const char* dir : {FLASHDESK_INSTALLED_MODEL_DIR, FLASHDESK_SOURCE_MODEL_DIR}) {
    std::error_code ignored;  // an unreadable folder is simply not the default
    if (std::filesystem::is_regular_file(std::filesystem::path(dir) / "config.json", ignored))
      return dir;
  }
  return {};
}

}  // namespace flashdesk::cli
