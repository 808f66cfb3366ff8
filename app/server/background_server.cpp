// The API server on its own thread (background_server.h).
#include "app/server/background_server.h"

#include <csignal>

namespace flashdesk::server {

BackgroundServer::BackgroundServer(ChatEngine& engine, TurnQueue& queue, ServeOptions options,
                                   CompletionServiceOptions service)
    : host_(options.host),
      service_(engine, std::move(service), queue),
      http_(service_, std::move(options)),
      port_(http_.bind()) {
  // A client that closes its socket mid-stream must fail the write, not end the program.
  std::signal(SIGPIPE, SIG_IGN);
  thread_ = std::thread([this] { http_.serve(); });
}

BackgroundServer::~BackgroundServer() {
  interrupt();
  http_.stop();
  thread_.join();
}

std::string BackgroundServer::url() const {
  return "http://" + host_ + ":" + std::to_string(port_) + "/v1";
}

}  // namespace flashdesk::server
