// The HTTP side of `flashdesk-cli serve`: routes of the OpenAI-compatible API on cpp-httplib,
// authentication, size limits and error objects; the engine work is CompletionService's.
//
// Goals: loopback by default; an API key whenever another address is bound; every failure an
// OpenAI-style error object with a 4xx (or 500) status; streams as server-sent events; answers,
// streamed or whole, that stop when the client goes away. Non-goals: TLS (put a reverse proxy in
// front), several models.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "app/server/completion_service.h"

namespace flashdesk::server {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                              // 0: any free port (bind() says which)
  std::string api_key;                          // empty: no key (loopback only)
  size_t max_request_bytes = size_t(32) << 20;  // bodies beyond get 413 (images are base64)
  int connections = 16;                         // served at once; later ones wait to be accepted
};

class HttpServer {
 public:
  // InvalidRequest when a non-loopback host is given without an API key.
  HttpServer(CompletionService& service, ServeOptions options);
  ~HttpServer();

  // Binds the address; returns the port. IoError when it cannot.
  int bind();
  // Serves until stop() (from another thread).
  void serve();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flashdesk::server
