// `flashdesk-cli chat`: a multi-turn conversation in the terminal. Ctrl-C stops the answer being
// written, not the program; with stdin not a terminal, each line is one user turn (scripts).
#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>

#include <unistd.h>

#include <cxxopts.hpp>

#include "app/cli/stream_printer.h"
#include "app/cli/turn_options.h"
#include "engine/util/error.h"

namespace flashdesk::cli {
namespace {

std::atomic<bool> g_stop{false};
std::atomic<bool> g_generating{false};

extern "C" void on_sigint(int) {
  if (g_generating.load()) {
    g_stop.store(true);
  } else {
    const char msg[] = "\n(type /quit or press Ctrl-D to leave)\n> ";
    [[maybe_unused]] auto n = write(STDOUT_FILENO, msg, sizeof msg - 1);
  }
}

void install_sigint_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
}

const char* kHelp =
    "commands: /quit, /reset (new conversation), /effort N|low|high|max, /thinking on|off,\n"
    "          /image PATH (attach an image to the next message)\n";

// Applies a /command; returns false to leave the chat. /image adds to `pending`.
bool run_command(const std::string& line, ChatSession& session, TurnOptions& opts,
                 ChatEngine& engine, std::vector<ImageRef>& pending) {
  if (line == "/quit" || line == "/exit") return false;
  if (line.rfind("/image ", 0) == 0) {
    pending.push_back(engine.prepare_image(line.substr(7)));
    const ImageGrid g = pending.back()->pixels.grid;
    std::printf("(image attached: %d x %d tokens)\n", g.rows, g.cols);
    return true;
  }
  if (line == "/reset") {
    session.reset();
    std::printf("(new conversation)\n");
  } else if (line.rfind("/effort ", 0) == 0) {
    opts.effort = ReasoningEffort::parse(line.substr(8));
    std::printf("(reasoning effort %d)\n", opts.effort.value());
  } else if (line == "/thinking on" || line == "/thinking off") {
    opts.mode = line == "/thinking on" ? ThinkingMode::kThinking : ThinkingMode::kChat;
    std::printf("(thinking %s)\n", line.substr(10).c_str());
  } else {
    std::printf("%s", kHelp);
  }
  return true;
}

}  // namespace

int run_chat(int argc, char** argv) {
  cxxopts::Options options("flashdesk-cli chat", "Chat with a model in the terminal.");
  add_model_options(options);
  add_turn_options(options);
  options.add_options()("system", "system prompt", cxxopts::value<std::string>())("h,help",
                                                                                  "show this help");
  const auto args = options.parse(argc, argv);
  if (args.count("help")) {
    std::printf("%s\n%s", options.help().c_str(), kHelp);
    return 0;
  }
  TurnOptions turn_opts = turn_options(args);
  const bool interactive = isatty(STDIN_FILENO) != 0;
  const bool json = args.count("json") > 0;
  auto engine = ChatEngine::load(args["model"].as<std::string>(), engine_options(args));
  ChatSession session(*engine);
  if (args.count("system")) session.set_system_prompt(args["system"].as<std::string>());
  install_sigint_handler();
  if (interactive) std::printf("FlashDesk chat with %s. %s", engine->name().c_str(), kHelp);

  StreamPrinter printer(stdout, isatty(STDOUT_FILENO) != 0);
  std::vector<ImageRef> pending = image_options(*engine, args);  // for the next user message
  std::string line;
  while (true) {
    if (interactive) std::printf("> "), std::fflush(stdout);
    if (!std::getline(std::cin, line)) break;
    if (line.empty()) continue;
    if (line[0] == '/') {
      try {
        if (!run_command(line, session, turn_opts, *engine, pending)) break;
      } catch (const Error& e) {
        std::printf("error: %s\n", e.what());
      }
      continue;
    }
    g_stop = false;
    g_generating = true;
    try {
      std::vector<ImageRef> images = std::move(pending);
      pending.clear();
      const TurnResult turn = session.send(user_message(line, images), images, turn_opts,
                                           json ? StreamCallbacks{} : printer.callbacks(), &g_stop);
      g_generating = false;
      if (json) {
        std::printf("%s\n", turn_json(turn).c_str());
      } else {
        printer.finish();
        if (turn.generation.finish == FinishReason::kStopped) std::printf("(stopped)\n");
        if (interactive) std::printf("%s\n", stats_line(turn.generation.stats).c_str());
      }
    } catch (const Error& e) {
      g_generating = false;
      printer.finish();
      std::printf("error: %s\n", e.what());
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace flashdesk::cli
