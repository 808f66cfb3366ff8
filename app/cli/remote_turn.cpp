// Declares and reads the --remote options.
#include "app/cli/remote_turn.h"

#include <string>

#include "engine/util/error.h"

namespace flashdesk::cli {

void add_remote_options(cxxopts::Options& options) {
#ifdef FLASHDESK_HAVE_REMOTE
  options.add_options("remote")(
      "remote", "use the model of an OpenAI-compatible server at URL (e.g. http://host:8000/v1)",
      cxxopts::value<std::string>())("api-key", "the remote server's API key (Bearer)",
                                     cxxopts::value<std::string>())(
      "remote-model", "the remote model's id (default: the first /models lists)",
      cxxopts::value<std::string>());
#else
  (void)options;
#endif
}

bool wants_remote(const cxxopts::ParseResult& args) {
#ifdef FLASHDESK_HAVE_REMOTE
  return args.count("remote") > 0;
#else
  (void)args;
  return false;
#endif
}

#ifdef FLASHDESK_HAVE_REMOTE
remote::RemoteOptions remote_options(const cxxopts::ParseResult& args) {
  for (const char* local :
       {"model", "backend", "threads", "max-context", "prefill", "chunk", "synthetic-weights"})
    if (args.count(local))
      throw InvalidRequest(std::string("--") + local + " applies to a local model, not --remote");
  remote::RemoteOptions o;
  o.url = args["remote"].as<std::string>();
  if (args.count("api-key")) o.api_key = args["api-key"].as<std::string>();
  if (args.count("remote-model")) o.model = args["remote-model"].as<std::string>();
  return o;
}
#endif

}  // namespace flashdesk::cli
