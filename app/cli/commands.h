// The flashdesk-cli subcommands: each lives in its own file and is listed once in commands.cpp.
#pragma once

#include <span>
#include <string_view>

namespace flashdesk::cli {

// argv[0] is the subcommand name; returns the process exit code.
using CommandFn = int (*)(int argc, char** argv);

struct Command {
  std::string_view name;
  std::string_view summary;
  CommandFn run;
};

std::span<const Command> commands();

}  // namespace flashdesk::cli
