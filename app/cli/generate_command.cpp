// `flashdesk-cli generate`: one prompt in, one answer out (streamed, or one JSON object).
#include <cstdio>
#include <string>

#include <unistd.h>

#include <cxxopts.hpp>

#include "app/cli/stream_printer.h"
#include "app/cli/turn_options.h"
#include "engine/util/error.h"

namespace flashdesk::cli {

int run_generate(int argc, char** argv) {
  cxxopts::Options options("flashdesk-cli generate", "Answer one prompt with a model.");
  add_model_options(options);
  add_turn_options(options);
  options.add_options()("prompt", "the user message", cxxopts::value<std::string>())(
      "system", "system prompt", cxxopts::value<std::string>())("h,help", "show this help");
  const auto args = options.parse(argc, argv);
  if (args.count("help")) {
    std::printf("%s\n", options.help().c_str());
    return 0;
  }
  if (!args.count("prompt")) throw InvalidRequest("--prompt TEXT is required");
  const TurnOptions turn_opts = turn_options(args);
  auto engine = ChatEngine::load(args["model"].as<std::string>(), engine_options(args));
  if (!engine->placement_summary().empty())
    std::fprintf(stderr, "placement: %s\n", engine->placement_summary().c_str());
  ChatSession session(*engine);
  if (args.count("system")) session.set_system_prompt(args["system"].as<std::string>());

  const bool json = args.count("json") > 0;
  StreamPrinter printer(stdout, isatty(STDOUT_FILENO) != 0);
  const TurnResult turn =
      session.send(user_turn(args["prompt"].as<std::string>(), image_options(*engine, args)),
                   turn_opts, json ? StreamCallbacks{} : printer.callbacks());
  if (json) {
    std::printf("%s\n", turn_json(turn).c_str());
  } else {
    printer.finish();
    std::fprintf(stderr, "%s\n", stats_line(turn.generation.stats).c_str());
  }
  return 0;
}

}  // namespace flashdesk::cli
