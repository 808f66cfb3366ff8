// Command-line parsing every benchmark shares (cxxopts): --help prints the options, and a
// misspelt option, a missing value or a stray argument is an error that names it, rather than a
// run with defaults the caller did not ask for.
#pragma once

// GCC 12 reports a false "maybe uninitialized" inside std::regex, which cxxopts uses.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <cstdio>
#include <cstdlib>
#include <cxxopts.hpp>
#include <string>

namespace flashdesk::bench {

// Parses argv; exits 0 after printing the help for -h/--help, exits 2 with a message on stderr
// for any option cxxopts does not know, a bad value, or an argument that is not an option.
inline cxxopts::ParseResult parse_options(cxxopts::Options& options, int argc, char** argv) {
  options.add_options()("h,help", "show this help");
  try {
    cxxopts::ParseResult args = options.parse(argc, argv);
    if (args.count("help")) {
      std::printf("%s\n", options.help().c_str());
      std::exit(0);
    }
    if (!args.unmatched().empty())
      throw cxxopts::exceptions::exception("unexpected argument '" + args.unmatched().front() +
                                           "'");
    return args;
  } catch (const cxxopts::exceptions::exception& e) {
    std::fprintf(stderr, "%s: %s (see --help)\n", options.program().c_str(), e.what());
    std::exit(2);
  }
}

}  // namespace flashdesk::bench
