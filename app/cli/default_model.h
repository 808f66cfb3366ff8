// Where the CLI looks for a model when none is given: the bundled demo model (flash-tiny).
#pragma once

#include <string>

namespace flashdesk::cli {

// The first folder holding a config.json among: the install prefix's share/flashdesk/models/
// flash-tiny (the .deb puts it in /usr/share), the source tree's assets/models/flash-tiny (an
// uninstalled build). Empty when neither exists, and `--model` is then required.
std::string default_model_dir();

}  // namespace flashdesk::cli
