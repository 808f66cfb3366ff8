// `flashdesk-cli generate`: one prompt in, one answer out (streamed, or one JSON object).
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include <cxxopts.hpp>

#include "app/cli/remote_turn.h"
#include "app/cli/stream_printer.h"
#include "app/cli/turn_options.h"
#include "engine/util/error.h"

namespace flashdesk::cli {

namespace {

// A finished answer: one JSON object, or the end of the streamed text and the statistics line on
// stderr.
void print_answer_end(const TurnResult& turn, bool json, StreamPrinter& printer) {
  if (json) {
    std::printf("%s\n", turn_json(turn).c_str());
  } else {
    printer.finish();
    std::fprintf(stderr, "%s\n", stats_line(turn.generation.stats).c_str());
  }
}

// The answer of a model served elsewhere (--remote), printed as a local one is.
int run_remote_generate(const cxxopts::ParseResult& args, const TurnOptions& turn_opts) {
#ifdef FLASHDESK_HAVE_REMOTE
  remote::RemoteChat chat(remote_options(args));
  if (args.count("system")) chat.set_system_prompt(args["system"].as<std::string>());
  std::vector<std::filesystem::path> images;
  if (args.count("image"))
    for (const std::string& file : args["image"].as<std::vector<std::string>>())
      images.emplace_back(file);
  const bool json = args.count("json") > 0;
  StreamPrinter printer(stdout, isatty(STDOUT_FILENO) != 0);
  TurnResult turn;
  turn.generation = chat.send(args["prompt"].as<std::string>(), images, turn_opts,
                              json ? StreamCallbacks{} : printer.callbacks());
  print_answer_end(turn, json, printer);
  return 0;
#else
  (void)args, (void)turn_opts;
  return 1;
#endif
}

}  // namespace

int run_generate(int argc, char** argv) {
  cxxopts::Options options("flashdesk-cli generate", "Answer one prompt with a model.");
  add_model_options(options);
  add_turn_options(options);
  add_remote_options(options);
  options.add_options()("prompt", "the user message", cxxopts::value<std::string>())(
      "system", "system prompt", cxxopts::value<std::string>())("h,help", "show this help");
  const auto args = options.parse(argc, argv);
  if (args.count("help")) {
    std::printf("%s\n", options.help().c_str());
    return 0;
  }
  if (!args.count("prompt")) throw InvalidRequest("--prompt TEXT is required");
  TurnOptions turn_opts = turn_options(args);
  if (wants_remote(args)) return run_remote_generate(args, turn_opts);
  auto engine = ChatEngine::load(args["model"].as<std::string>(), engine_options(args));
  choose_speculative(turn_opts, args, *engine);
  if (!engine->placement_summary().empty())
    std::fprintf(stderr, "placement: %s\n", engine->placement_summary().c_str());
  ChatSession session(*engine);
  if (args.count("system")) session.set_system_prompt(args["system"].as<std::string>());

  const bool json = args.count("json") > 0;
  StreamPrinter printer(stdout, isatty(STDOUT_FILENO) != 0);
  const TurnResult turn =
      session.send(user_turn(args["prompt"].as<std::string>(), image_options(*engine, args)),
                   turn_opts, json ? StreamCallbacks{} : printer.callbacks());
  print_answer_end(turn, json, printer);
  return 0;
}

}  // namespace flashdesk::cli
