// `flashdesk-cli serve`: the OpenAI-compatible API on localhost (app/server/, docs/server.md).
#ifdef FLASHDESK_HAVE_SERVER
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <pthread.h>

#include <cxxopts.hpp>

#include "app/cli/turn_options.h"
#include "app/server/api_key.h"
#include "app/server/http_server.h"
#include "app/server/server_kv_stores.h"
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
  options.add_options("KV cache")(
      "kv-store", "on: conversations' KV also in the window pool and SSD blocks; off: live only",
      cxxopts::value<std::string>()->default_value("on"))(
      "data-dir", "folder of the SSD KV blocks (default: the XDG data and cache folders)",
      cxxopts::value<std::string>()->default_value(""))(
      "block-tokens", "tokens per SSD KV block (a multiple of every compress ratio)",
      cxxopts::value<int64_t>()->default_value("256"));
}

bool kv_store_on(const cxxopts::ParseResult& args) {
  const std::string on = args["kv-store"].as<std::string>();
  if (on != "on" && on != "off") throw InvalidRequest("--kv-store must be on or off");
  return on == "on";
}

storage::StorageLayout data_layout(const cxxopts::ParseResult& args) {
  const std::string dir = args["data-dir"].as<std::string>();
  return dir.empty() ? storage::StorageLayout::from_environment() : storage::StorageLayout::in(dir);
}

// The data folder's stores behind the live slots (none with --kv-store off).
std::unique_ptr<server::ServerKvStores> kv_stores(const cxxopts::ParseResult& args) {
  if (!kv_store_on(args)) return nullptr;
  storage::KvBlockStoreOptions blocks;
  blocks.tokens_per_block = args["block-tokens"].as<int64_t>();
  return std::make_unique<server::ServerKvStores>(data_layout(args), blocks);
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

// SIGINT and SIGTERM, blocked in every thread (the engine's included: blocked before any starts)
// and taken by a waiter thread of their own, so nothing is torn down from a signal handler. While
// the model loads the first ends the process; while serving it stops the server and the
// generation in flight, and a second ends the process at once.
class StopSignals {
 public:
  StopSignals() {
    sigemptyset(&signals_);
    sigaddset(&signals_, SIGINT);
    sigaddset(&signals_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
    waiter_ = std::thread([this] { wait(); });
  }
  ~StopSignals() {
    finish();
    pthread_kill(waiter_.native_handle(), SIGTERM);  // wakes the waiter, which sees finished_
    waiter_.join();
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  void serving(server::CompletionService& service, server::HttpServer& http) {
    std::lock_guard lock(mutex_);
    service_ = &service;
    http_ = &http;
  }
  // Serving is over: a signal no longer touches the server (about to be destroyed).
  void finish() {
    std::lock_guard lock(mutex_);
    finished_ = true;
  }

 private:
  void wait() {
    int signal = 0;
    sigwait(&signals_, &signal);
    {
      std::lock_guard lock(mutex_);
      if (finished_) return;
      if (http_ == nullptr) std::_Exit(128 + signal);  // still loading: nothing to tear down
      std::fprintf(stderr, "[serve] stopping (a second Ctrl-C ends at once)\n");
      service_->cancel_all();
      http_->stop();
    }
    sigwait(&signals_, &signal);
    if (!finished_) std::_Exit(128 + signal);
  }

  sigset_t signals_;
  std::atomic<bool> finished_{false};
  std::mutex mutex_;  // guards the pointers below against the server's teardown
  server::CompletionService* service_ = nullptr;
  server::HttpServer* http_ = nullptr;
  std::thread waiter_;
};

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
  StopSignals stop_signals;
  const std::unique_ptr<server::ServerKvStores> stores = kv_stores(args);
  auto engine = ChatEngine::load(args["model"].as<std::string>(), engine_options(args));
  server::CompletionServiceOptions service_options;
  service_options.kept_conversations = args["keep"].as<int>();
  if (stores) {
    service_options.tiers = stores->tiers();
    service_options.answers_dir = server::answers_dir(data_layout(args));
  }
  server::CompletionService service(*engine, std::move(service_options));
  server::HttpServer http(service, serve);
  const int port = http.bind();
  stop_signals.serving(service, http);
  std::printf("serving %s on http://%s:%d/v1 (Ctrl-C stops)\n", service.model_id().c_str(),
              serve.host.c_str(), port);
  std::fflush(stdout);
  http.serve();
  stop_signals.finish();
  return 0;
}

}  // namespace flashdesk::cli
#endif  // FLASHDESK_HAVE_SERVER
