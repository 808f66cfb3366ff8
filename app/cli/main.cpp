// flashdesk-cli: dispatches to a subcommand and turns engine errors into messages.
#include <cstdio>
#include <exception>
#include <string_view>

#include "app/cli/commands.h"
#include "engine/util/error.h"

namespace {

void print_usage() {
  std::fprintf(stderr,
               "usage: flashdesk-cli <command> [options]   (<command> --help for its options)\n\n");
  for (const auto& c : flashdesk::cli::commands())
    std::fprintf(stderr, "  %-12.*s %.*s\n", static_cast<int>(c.name.size()), c.name.data(),
                 static_cast<int>(c.summary.size()), c.summary.data());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string_view(argv[1]) == "--help" || std::string_view(argv[1]) == "-h") {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  // `--version` is the usual spelling (packagers and scripts try it first); the same as `version`.
  const std::string_view name =
      std::string_view(argv[1]) == "--version" ? std::string_view("version") : argv[1];
  for (const auto& c : flashdesk::cli::commands()) {
    if (c.name != name) continue;
    try {
      return c.run(argc - 1, argv + 1);
    } catch (const flashdesk::Error& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "flashdesk-cli: unknown command '%.*s'\n\n", static_cast<int>(name.size()),
               name.data());
  print_usage();
  return 2;
}
