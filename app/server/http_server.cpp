// Routes, authentication and server-sent events of the API server (http_server.h).
#include "app/server/http_server.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include <httplib.h>

#include "app/server/api_error.h"
#include "app/server/api_key.h"
#include "app/server/chat_response.h"
#include "app/server/client_connection.h"
#include "engine/util/error.h"

namespace flashdesk::server {
namespace {

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status();
  res.set_content(e.json(), "application/json");
}

// An error for a status httplib answered itself (no route, body too large, ...).
ApiError status_error(int status) {
  switch (status) {
    case 404:
      return ApiError(404, "invalid_request_error", "unknown request URL", {}, "not_found");
    case 405:
      return ApiError(405, "invalid_request_error", "method not allowed");
    case 413:
      return ApiError(413, "invalid_request_error", "the request body is too large", {},
                      "request_too_large");
    default:
      return ApiError(status, status >= 500 ? "server_error" : "invalid_request_error",
                      "HTTP error " + std::to_string(status));
  }
}

// One server-sent event.
bool send_event(httplib::DataSink& sink, const std::string& data) {
  const std::string event = "data: " + data + "\n\n";
  return sink.write(event.data(), event.size());
}

void log_completion(const Completion& c, double seconds, int64_t waiting) {
  std::fprintf(
      stderr,
      "[serve] %lld prompt tokens (%lld cached: %lld from SSD, %lld from the window pool), "
      "%lld generated, %s%s, %.2f s, %lld waiting\n",
      (long long)c.usage.prompt_tokens, (long long)c.usage.cached_tokens,
      (long long)c.usage.from_ssd, (long long)c.usage.from_pool,
      (long long)c.usage.completion_tokens, c.finish_reason.c_str(),
      c.cancelled ? " (client gone)" : "", seconds, (long long)waiting);
}

}  // namespace

struct HttpServer::Impl {
  CompletionService& service;
  ServeOptions options;
  httplib::Server server;
  std::atomic<uint64_t> next_id{0};
  std::atomic<bool> stopping{false};  // stop() was called
  std::atomic<bool> served{false};    // serve() has returned
  int64_t started = unix_seconds();

  void routes();
  bool authorized(const httplib::Request& req, httplib::Response& res) const;
  void chat(const std::string& body, const httplib::Request& req, httplib::Response& res);
  Completion answer_whole(const PreparedRequest& request, const httplib::Request& req);
  void stream(const ResponseHeader& header, const PreparedRequest& request, bool include_usage,
              httplib::DataSink& sink);
  ResponseHeader header() {
    char id[48];
    std::snprintf(id, sizeof id, "chatcmpl-%llx-%llu", (unsigned long long)started,
                  (unsigned long long)next_id++);
    return {.id = id, .created = unix_seconds(), .model = service.model_id()};
  }
};

bool HttpServer::Impl::authorized(const httplib::Request& req, httplib::Response& res) const {
  if (options.api_key.empty()) return true;
  if (bearer_matches(req.get_header_value("Authorization"), options.api_key)) return true;
  send_error(res, ApiError(401, "invalid_request_error",
                           "missing or incorrect API key (Authorization: Bearer KEY)", {},
                           "invalid_api_key"));
  return false;
}

void HttpServer::Impl::stream(const ResponseHeader& h, const PreparedRequest& request,
                              bool include_usage, httplib::DataSink& sink) {
  const auto started_at = std::chrono::steady_clock::now();
  if (!send_event(sink, chunk_json(h, R"({"role":"assistant","content":""})"))) return;
  Completion c;
  try {
    c = service.complete(request, [&](StreamChannel channel, std::string_view text) {
      return send_event(sink, chunk_json(h, text_delta(channel, text)));
    });
  } catch (const ApiError& e) {
    send_event(sink, e.json());
    return;
  } catch (const std::exception& e) {
    send_event(sink, ApiError(500, "server_error", e.what()).json());
    return;
  }
  log_completion(
      c, std::chrono::duration<double>(std::chrono::steady_clock::now() - started_at).count(),
      service.waiting());
  if (c.cancelled) return;
  send_event(sink, chunk_json(h, "{}", c.finish_reason));
  if (include_usage) send_event(sink, usage_chunk_json(h, c.usage));
  send_event(sink, "[DONE]");
}

// A whole answer stops when its client is gone: checked before the turn starts and between
// tokens, on the request's socket (client_connection.h); cancelled, nothing is sent.
Completion HttpServer::Impl::answer_whole(const PreparedRequest& request,
                                          const httplib::Request& req) {
  const auto connection =
      ClientConnection::find({req.local_addr, req.local_port}, {req.remote_addr, req.remote_port});
  if (connection && connection->gone()) {
    Completion c;
    c.cancelled = true;
    c.finish_reason = "stop";
    return c;
  }
  return service.complete(
      request, [&](StreamChannel, std::string_view) { return !connection || !connection->gone(); });
}

void HttpServer::Impl::chat(const std::string& body, const httplib::Request& req,
                            httplib::Response& res) {
  try {
    const ChatRequest parsed = parse_chat_request(body);
    if (parsed.model != service.model_id())
      throw ApiError(404, "invalid_request_error",
                     "the model '" + parsed.model + "' does not exist; this server has '" +
                         service.model_id() + "'",
                     "model", "model_not_found");
    auto request = std::make_shared<PreparedRequest>(service.prepare(parsed));
    std::shared_ptr<TurnQueue::Turn> turn = service.wait_turn();
    service.check(*request);
    const ResponseHeader h = header();
    if (!parsed.stream) {
      const auto started_at = std::chrono::steady_clock::now();
      const Completion c = answer_whole(*request, req);
      turn.reset();
      log_completion(
          c, std::chrono::duration<double>(std::chrono::steady_clock::now() - started_at).count(),
          service.waiting());
      if (!c.cancelled) res.set_content(completion_json(h, c), "application/json");
      return;
    }
    // The turn stays held until the stream ends (or the response is dropped unsent).
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, h, request, turn, usage = parsed.include_usage](size_t, httplib::DataSink& sink) {
          stream(h, *request, usage, sink);
          sink.done();
          return true;
        });
  } catch (const ApiError& e) {
    send_error(res, e);
  }
}

void HttpServer::Impl::routes() {
  server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    return authorized(req, res) ? httplib::Server::HandlerResponse::Unhandled
                                : httplib::Server::HandlerResponse::Handled;
  });
  server.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  server.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(models_json(service.model_id(), started), "application/json");
  });
  // OpenAI's "retrieve model" (client.models.retrieve): the served model, or 404 as chat gives
  // for another id. The id may hold slashes ("org/name"): the rest of the path is the id.
  server.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    if (id != service.model_id())
      return send_error(res, ApiError(404, "invalid_request_error",
                                      "the model '" + id + "' does not exist; this server has '" +
                                          service.model_id() + "'",
                                      "model", "model_not_found"));
    res.set_content(model_json(service.model_id(), started), "application/json");
  });
  // The body is read here rather than by httplib, which would parse a body sent as a form
  // (curl -d without a Content-Type) and refuse it past 8 KiB; any Content-Type is read as JSON.
  server.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res,
                                             const httplib::ContentReader& content) {
    std::string body;
    const bool whole = content([&](const char* data, size_t size) {
      if (body.size() + size > options.max_request_bytes) return false;
      body.append(data, size);
      return true;
    });
    if (!whole) return send_error(res, status_error(413));
    chat(body, req, res);
  });
  server.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty()) send_error(res, status_error(res.status));
  });
  server.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          send_error(res, ApiError(500, "server_error", e.what()));
        } catch (...) {
          send_error(res, ApiError(500, "server_error", "unknown error"));
        }
      });
}

HttpServer::HttpServer(CompletionService& service, ServeOptions options)
    : impl_(std::make_unique<Impl>(service, std::move(options))) {
  if (!is_loopback(impl_->options.host) && impl_->options.api_key.empty())
    throw InvalidRequest("serving on " + impl_->options.host +
                         " (not loopback) needs an API key (serve: --api-key or --api-key-file; "
                         "the app: File ▸ Settings ▸ API key)");
  if (impl_->options.connections < 1) throw InvalidRequest("--connections must be at least 1");
  const int connections = impl_->options.connections;
  impl_->server.new_task_queue = [connections] { return new httplib::ThreadPool(connections); };
  impl_->server.set_payload_max_length(impl_->options.max_request_bytes);
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, with which a second server (another
  // `serve`, or the app's switch) binds a port already served and the kernel splits the
  // connections between the two; a taken port must fail to bind instead.
  impl_->server.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  impl_->routes();
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  const ServeOptions& o = impl_->options;
  const int port = o.port == 0 ? impl_->server.bind_to_any_port(o.host)
                               : (impl_->server.bind_to_port(o.host, o.port) ? o.port : -1);
  if (port < 0)
    throw IoError("cannot listen on " + o.host + ":" + std::to_string(o.port) +
                  " (in use, or not an address of this machine)");
  return port;
}

void HttpServer::serve() {
  if (!impl_->stopping) impl_->server.listen_after_bind();
  impl_->served = true;
}

// httplib's stop() does nothing before its listen loop has started, so a stop that comes between
// bind() and serve() waits for the loop (or for serve() to have seen `stopping`) rather than be
// lost.
void HttpServer::stop() {
  impl_->stopping = true;
  while (!impl_->server.is_running() && !impl_->served)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  impl_->server.stop();
}

}  // namespace flashdesk::server
