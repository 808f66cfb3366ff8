// The table of flashdesk-cli subcommands.
#include "app/cli/commands.h"

#include <array>

namespace flashdesk::cli {

int run_version(int argc, char** argv);
int run_tokenize(int argc, char** argv);
#ifdef FLASHDESK_HAVE_STORAGE
int run_sessions(int argc, char** argv);
#endif
int run_inspect(int argc, char** argv);
int run_make_random(int argc, char** argv);
int run_logits(int argc, char** argv);
int run_generate(int argc, char** argv);
int run_chat(int argc, char** argv);
int run_eval(int argc, char** argv);
#ifdef FLASHDESK_HAVE_SERVER
int run_serve(int argc, char** argv);
#endif

namespace {
const std::array kCommands = {
    Command{"version", "print the engine version and build options", run_version},
    Command{"tokenize", "encode stdin to token ids (or decode ids with --decode)", run_tokenize},
#ifdef FLASHDESK_HAVE_STORAGE
    Command{"sessions", "list, show, rename, delete, export or import chat sessions", run_sessions},
#endif
    Command{"inspect", "summarise a model directory or config.json: roles, sizes, KV bytes",
            run_inspect},
    Command{"generate", "answer one prompt (streamed, or --json)", run_generate},
    Command{"chat", "chat in the terminal (one turn per line when piped)", run_chat},
#ifdef FLASHDESK_HAVE_SERVER
    Command{"serve", "serve the model over an OpenAI-compatible HTTP API on localhost", run_serve},
#endif
    Command{"eval", "evaluate a model on the demo suite (accuracy table)", run_eval},
    Command{"make-random", "write a random checkpoint for a config (tests, benchmarks)",
            run_make_random},
    Command{"logits", "logits and per-block dumps of a prefill and decode steps (cross-checking)",
            run_logits},
};
}  // namespace

std::span<const Command> commands() {
  return kCommands;
}

}  // namespace flashdesk::cli
