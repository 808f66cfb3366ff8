// `flashdesk-cli chat`: a multi-turn conversation in the terminal. Ctrl-C stops the answer being
// written, not the program; with stdin not a terminal, each line is one user turn (scripts).
// With --session ID|new the conversation is stored and continues after a restart (storage/),
// images (--image, /image) included.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <utility>

#include <unistd.h>

#include <cxxopts.hpp>

#include "app/cli/remote_turn.h"
#include "app/cli/stream_printer.h"
#include "app/cli/turn_options.h"
#include "engine/util/error.h"
#ifdef FLASHDESK_HAVE_STORAGE
#include "storage/persistent_chat.h"
#endif
#ifdef FLASHDESK_HAVE_REMOTE
#include "app/cli/remote_session.h"
#endif

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

// A finished turn: one JSON object (with `extra` fields), or the end of the streamed text, a
// "(stopped)" line and, interactively, the statistics line.
void print_turn_end(const TurnResult& turn, bool json, bool interactive, StreamPrinter& printer,
                    const std::vector<std::pair<std::string, int64_t>>& extra = {}) {
  if (json) {
    std::printf("%s\n", turn_json(turn, extra).c_str());
  } else {
    printer.finish();
    if (turn.generation.finish == FinishReason::kStopped) std::printf("(stopped)\n");
    if (interactive) std::printf("%s\n", stats_line(turn.generation.stats).c_str());
  }
}

// A turn that failed: generation over, the streamed text ended, the error said.
void end_failed_turn(StreamPrinter& printer, const Error& e) {
  g_generating = false;
  printer.finish();
  std::printf("error: %s\n", e.what());
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

// One conversation, in memory (ChatSession) or stored (PersistentChat).
struct Conversation {
  std::function<TurnResult(const std::string&, std::vector<ImageRef>, const TurnOptions&,
                           const StreamCallbacks&)>
      send;
  std::function<void()> reset;
  std::function<std::vector<std::pair<std::string, int64_t>>()> json_extra = [] {
    return std::vector<std::pair<std::string, int64_t>>{};
  };
};

// Applies /effort and /thinking to `opts`; false for any other line.
bool apply_setting(const std::string& line, TurnOptions& opts) {
  if (line.rfind("/effort ", 0) == 0) {
    opts.effort = ReasoningEffort::parse(line.substr(8));
    std::printf("(reasoning effort %d)\n", opts.effort.value());
  } else if (line == "/thinking on" || line == "/thinking off") {
    opts.mode = line == "/thinking on" ? ThinkingMode::kThinking : ThinkingMode::kChat;
    std::printf("(thinking %s)\n", line.substr(10).c_str());
  } else {
    return false;
  }
  return true;
}

// Applies a /command; returns false to leave the chat. /image adds to `pending`.
bool run_command(const std::string& line, Conversation& session, TurnOptions& opts,
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
  } else if (!apply_setting(line, opts)) {
    std::printf("%s", kHelp);
  }
  return true;
}

Conversation in_memory(ChatEngine& engine, std::unique_ptr<ChatSession>& holder,
                       const cxxopts::ParseResult& args) {
  holder = std::make_unique<ChatSession>(engine);
  if (args.count("system")) holder->set_system_prompt(args["system"].as<std::string>());
  ChatSession* session = holder.get();
  return Conversation{.send =
                          [session](const std::string& line, std::vector<ImageRef> images,
                                    const TurnOptions& opts, const StreamCallbacks& cb) {
                            return session->send(user_turn(line, std::move(images)), opts, cb,
                                                 &g_stop);
                          },
                      .reset =
                          [session] {
                            session->reset();
                            std::printf("(new conversation)\n");
                          }};
}

#ifdef FLASHDESK_HAVE_STORAGE
// A new session's id, before its first turn: `session N`, or {"session_id":N} with --json.
void announce_session(int64_t id, bool json) {
  if (json)
    std::printf("{\"session_id\":%lld}\n", (long long)id);
  else
    std::printf("session %lld\n", (long long)id);
  std::fflush(stdout);
}

// --session's value when it is not 'new'.
int64_t session_id_of(const std::string& which) {
  try {
    return std::stoll(which);
  } catch (const std::exception&) {
    throw InvalidRequest("--session must be a session id or 'new', not '" + which + "'");
  }
}

// --session ID|new: the stored session, continued from its messages and cached KV.
Conversation persistent(ChatEngine& engine, std::unique_ptr<storage::PersistentChat>& holder,
                        const cxxopts::ParseResult& args, const TurnOptions& opts, bool json) {
  const std::string dir = args["data-dir"].as<std::string>();
  storage::PersistentChatOptions o{.layout = dir.empty()
                                                 ? storage::StorageLayout::from_environment()
                                                 : storage::StorageLayout::in(dir)};
  o.blocks.tokens_per_block = args["block-tokens"].as<int64_t>();
  holder = std::make_unique<storage::PersistentChat>(engine, std::move(o));
  storage::PersistentChat* chat = holder.get();
  const std::string system = args.count("system") ? args["system"].as<std::string>() : "";
  auto announce = [chat, json] { announce_session(*chat->session_id(), json); };
  const std::string which = args["session"].as<std::string>();
  if (which == "new") {
    chat->create_session("chat", chat->settings_for(opts, system));
    announce();
  } else {
    chat->open_session(session_id_of(which));
  }
  auto last = std::make_shared<storage::SessionTurn>();
  // The session stores each file's bytes and prepares the image again from them
  // (prepare_image named each ImageRef after its file).
  auto send = [chat, last](const std::string& line, std::vector<ImageRef> images,
                           const TurnOptions& o2, const StreamCallbacks& cb) {
    std::vector<std::filesystem::path> files;
    for (const ImageRef& image : images) files.emplace_back(image->name);
    *last = chat->send(line, files, o2, cb, &g_stop);
    if (last->storage_warning)
      std::fprintf(stderr, "warning: %s\n", last->storage_warning->c_str());
    return last->turn;
  };
  return Conversation{.send = std::move(send),
                      .reset =
                          [chat, opts, system, announce] {
                            chat->create_session("chat", chat->settings_for(opts, system));
                            announce();
                          },
                      .json_extra =
                          [chat, last] {
                            return std::vector<std::pair<std::string, int64_t>>{
                                {"session_id", *chat->session_id()},
                                {"answer_message_id", last->answer_message_id},
                                {"corrupt_blocks", last->corrupt_blocks},
                                {"blocks_queued", last->blocks_queued}};
                          }};
}
#endif

#ifdef FLASHDESK_HAVE_REMOTE  // flashdesk_remote links flashdesk_storage: sessions are there
// --remote with --session ID|new: the stored session's history is what each turn resends.
std::unique_ptr<RemoteSession> remote_session(remote::RemoteChat& chat,
                                              const cxxopts::ParseResult& args,
                                              const TurnOptions& opts, bool json) {
  if (!args.count("session")) return nullptr;
  const std::string dir = args["data-dir"].as<std::string>();
  auto session = std::make_unique<RemoteSession>(
      chat, remote_options(args),
      dir.empty() ? storage::StorageLayout::from_environment() : storage::StorageLayout::in(dir));
  const std::string which = args["session"].as<std::string>();
  if (which != "new") {
    session->open(session_id_of(which));
    return session;
  }
  session->create(opts, args.count("system") ? args["system"].as<std::string>() : "");
  announce_session(session->id(), json);
  return session;
}

// --remote: the same loop against a model served elsewhere; the history is kept in memory (or,
// with --session, in the session store) and resent each turn (the server's prefix cache, if any,
// serves it). Images are sent as files.
int run_remote_chat(const cxxopts::ParseResult& args, TurnOptions opts) {
  remote::RemoteChat chat(remote_options(args));
  const bool json = args.count("json") > 0;
  auto session = remote_session(chat, args, opts, json);
  if (args.count("system")) chat.set_system_prompt(args["system"].as<std::string>());
  install_sigint_handler();
  const bool interactive = isatty(STDIN_FILENO) != 0;
  if (interactive) std::printf("FlashDesk chat with %s (remote). %s", chat.model().c_str(), kHelp);
  StreamPrinter printer(stdout, isatty(STDOUT_FILENO) != 0);
  std::vector<std::filesystem::path> pending;
  if (args.count("image"))
    for (const std::string& file : args["image"].as<std::vector<std::string>>())
      pending.emplace_back(file);
  std::string line;
  while (true) {
    if (interactive) std::printf("> "), std::fflush(stdout);
    if (!std::getline(std::cin, line)) break;
    if (line.empty()) continue;
    if (line == "/quit" || line == "/exit") break;
    try {
      if (line.rfind("/image ", 0) == 0) {
        pending.emplace_back(line.substr(7));
        std::printf("(image attached)\n");
      } else if (line == "/reset") {
        chat.reset();
        std::printf("(new conversation)\n");
        if (session)
          announce_session(
              session->create(opts, args.count("system") ? args["system"].as<std::string>() : ""),
              json);
      } else if (line[0] == '/') {
        if (!apply_setting(line, opts)) std::printf("%s", kHelp);
      } else {
        g_stop = false;
        g_generating = true;
        TurnResult turn;
        const StreamCallbacks callbacks = json ? StreamCallbacks{} : printer.callbacks();
        std::vector<std::pair<std::string, int64_t>> extra;
        if (session) {
          turn.generation =
              session->send(line, std::exchange(pending, {}), opts, callbacks, &g_stop);
          extra.emplace_back("session_id", session->id());
        } else {
          turn.generation = chat.send(line, std::exchange(pending, {}), opts, callbacks, &g_stop);
        }
        g_generating = false;
        print_turn_end(turn, json, interactive, printer, extra);
      }
    } catch (const Error& e) {
      end_failed_turn(printer, e);
    }
    std::fflush(stdout);
  }
  return 0;
}
#endif

}  // namespace

int run_chat(int argc, char** argv) {
  cxxopts::Options options("flashdesk-cli chat", "Chat with a model in the terminal.");
  add_model_options(options);
  add_turn_options(options);
  add_remote_options(options);
  options.add_options()("system", "system prompt", cxxopts::value<std::string>())("h,help",
                                                                                  "show this help");
#ifdef FLASHDESK_HAVE_STORAGE
  options.add_options("sessions")("session", "continue stored session ID, or 'new'",
                                  cxxopts::value<std::string>())(
      "data-dir", "folder of sessions and KV blocks (default: the XDG data and cache folders)",
      cxxopts::value<std::string>()->default_value(""))(
      "block-tokens", "tokens per SSD KV block (a multiple of every compress ratio)",
      cxxopts::value<int64_t>()->default_value("256"));
#endif
  const auto args = options.parse(argc, argv);
  if (args.count("help")) {
    std::printf("%s\n%s", options.help().c_str(), kHelp);
    return 0;
  }
  TurnOptions turn_opts = turn_options(args);
#ifdef FLASHDESK_HAVE_REMOTE
  if (wants_remote(args)) return run_remote_chat(args, turn_opts);
#endif
  const bool interactive = isatty(STDIN_FILENO) != 0;
  const bool json = args.count("json") > 0;
  std::string data_dir;  // also where built Engram token maps are kept
#ifdef FLASHDESK_HAVE_STORAGE
  data_dir = args["data-dir"].as<std::string>();
#endif
  auto engine = ChatEngine::load(args["model"].as<std::string>(), engine_options(args, data_dir));
  choose_speculative(turn_opts, args, *engine);
  if (!engine->placement_summary().empty())
    std::fprintf(stderr, "placement: %s\n", engine->placement_summary().c_str());
  std::unique_ptr<ChatSession> memory_session;
  Conversation session;
#ifdef FLASHDESK_HAVE_STORAGE
  std::unique_ptr<storage::PersistentChat> stored;
  if (args.count("session"))
    session = persistent(*engine, stored, args, turn_opts, json);
  else
#endif
    session = in_memory(*engine, memory_session, args);
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
      const TurnResult turn = session.send(line, std::move(images), turn_opts,
                                           json ? StreamCallbacks{} : printer.callbacks());
      g_generating = false;
      print_turn_end(turn, json, interactive, printer, session.json_extra());
    } catch (const Error& e) {
      end_failed_turn(printer, e);
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace flashdesk::cli
