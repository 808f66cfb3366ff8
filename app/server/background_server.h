// The API server on a thread of its own, for a program that does other work meanwhile: the desktop
// app's "Serve on localhost" switch (docs/server.md, "In the app"). The same CompletionService and
// HttpServer as `flashdesk-cli serve`, on an engine the program has already loaded.
//
// Goals: bound when constructed (a taken port fails there, with its message); turns taken in a
// queue shared with the program's own use of the engine; destroyed = stopped: no more
// connections, the answer in flight ended after its current token, the thread joined. Non-goals:
// signals (the CLI's), a second engine.
#pragma once

#include <string>
#include <thread>

#include "app/server/completion_service.h"
#include "app/server/http_server.h"

namespace flashdesk::server {

class BackgroundServer {
 public:
  // IoError when the address cannot be bound, InvalidRequest for bad options. `engine`,
  // `queue` and the stores of `service.tiers` outlive this server.
  BackgroundServer(ChatEngine& engine, TurnQueue& queue, ServeOptions options,
                   CompletionServiceOptions service = {});
  ~BackgroundServer();
  BackgroundServer(const BackgroundServer&) = delete;
  BackgroundServer& operator=(const BackgroundServer&) = delete;

  int port() const { return port_; }
  // The API's base URL, http://HOST:PORT/v1.
  std::string url() const;
  const std::string& model_id() const { return service_.model_id(); }
  // Ends the API answer in flight after its current token, and every later one at its first
  // (the server is about to stop). Any thread.
  void interrupt() { service_.cancel_all(); }

 private:
  std::string host_;
  CompletionService service_;
  HttpServer http_;
  int port_;
  std::thread thread_;  // runs http_.serve(); last, so it starts after the rest exists
};

}  // namespace flashdesk::server
