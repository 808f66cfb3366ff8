// The table of flashdesk-cli subcommands.
#include "app/cli/commands.h"

#include <array>

namespace flashdesk::cli {

int run_version(int argc, char** argv);
int run_tokenize(int argc, char** argv);

namespace {
const std::array kCommands = {
    Command{"version", "print the engine version and build options", run_version},
    Command{"tokenize", "encode stdin to token ids (or decode ids with --decode)", run_tokenize},
};
}  // namespace

std::span<const Command> commands() {
  return kCommands;
}

}  // namespace flashdesk::cli
