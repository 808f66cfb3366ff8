// `flashdesk-cli serve`: the OpenAI-compatible API on localhost (app/server/, docs/server.md).
#ifdef FLASHDESK_HAVE_SERVER
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>

#include <pthread.h>

#include <cxxopts.hpp>

#include "app/cli/turn_options.h"
#include "app/server/api_key.h"
#include "app/server/http_server.h"
#include "engine/util/error.h"

namespace flashdesk::cli {
namespace {

void add_serve_options(cxxopts::Options& options) {
  options.add_options("server")("host", "address to listen on (not loopback: needs an API key)",
                                cxxopts::value<std::string>()->default_value("127.0.0.1"))(
      "port", "TCP port (0: any free port, printed at start)",
      cxxopts::value<int>()->default_value("8080"))("api-key", "require Authorization: Bearer KEY",
                                                    cxxopts::value<std::string>())(
      "api-key-file", "read the API key from the first line of FILE",
      cxxopts::value<std::string>())("max-request-mb", "largest request body in MiB",
                                     cxxopts::value<int>()->default_value("32"))(
      "keep", "conversations whose live KV is kept for reuse",
      cxxopts::value<int>()->default_value("2"))(
      "connections", "connections served at once (more wait to be accepted)",
      cxxopts::value<int>()->default_value("16"))("h,help", "show this help");
}

server::ServeOptions serve_options(const cxxopts::ParseResult& args) {
  server::ServeOptions o;
  o.host = args["host"].as<std::string>();
  o.port = args["port"].as<int>();
  if (o.port < 0 || o.port > 65535) throw InvalidRequest("--port must be 0-65535");
  if (args.count("api-key") && args.count("api-key-file"))
    throw InvalidRequest("give --api-key or --api-key-file, not both");
  if (args.count("api-key")) o.api_key = args["api-key"].as<std::string>();
  if (args.count("api-key-file"))
    o.api_key = server::read_api_key_file(args["api-key-file"].as<std::string>());
  const int mb = args["max-request-mb"].as<int>();
  if (mb < 1 || mb > 1024) throw InvalidRequest("--max-request-mb must be 1-1024");
  o.max_request_bytes = size_t(mb) << 20;
  o.connections = args["connections"].as<int>();
  if (!server::is_loopback(o.host) && o.api_key.empty())  // before the model is loaded
    throw InvalidRequest("serving on " + o.host +
                         " (not loopback) needs --api-key or --api-key-file");
  return o;
}

// SIGINT and SIGTERM are blocked in every thread (call before any starts, the engine's
// included) and taken by one waiting thread that stops the server, so the engine is torn down
// in order rather than from a signal handler.
sigset_t block_stop_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

std::thread stop_on_signal(const sigset_t& signals, server::HttpServer& http) {
  return std::thread([signals, &http] {
    int signal = 0;
    sigwait(&signals, &signal);
    http.stop();
  });
}

}  // namespace

int run_serve(int argc, char** argv) {
  cxxopts::Options options("flashdesk-cli serve",
                           "Serve a model over an OpenAI-compatible HTTP API (docs/server.md).");
  add_model_options(options);
  add_serve_options(options);
  const auto args = options.parse(argc, argv);
  if (args.count("help")) {
    std::printf("%s\n", options.help().c_str());
    return 0;
  }
  server::ServeOptions serve = serve_options(args);
  // A client that closes its socket mid-stream must fail the write, not end the process.
  std::signal(SIGPIPE, SIG_IGN);
  const sigset_t stop_signals = block_stop_signals();
  auto engine = ChatEngine::load(args["model"].as<std::string>(), engine_options(args));
  server::CompletionService service(*engine, args["keep"].as<int>());
  server::HttpServer http(service, serve);
  const int port = http.bind();
  std::thread stopper = stop_on_signal(stop_signals, http);
  std::printf("serving %s on http://%s:%d/v1 (Ctrl-C stops)\n", service.model_id().c_str(),
              serve.host.c_str(), port);
  std::fflush(stdout);
  http.serve();
  if (stopper.joinable()) {
    pthread_kill(stopper.native_handle(), SIGTERM);  // a stop() from elsewhere: end the waiter
    stopper.join();
  }
  return 0;
}

}  // namespace flashdesk::cli
#endif  // FLASHDESK_HAVE_SERVER
