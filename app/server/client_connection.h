// Whether the client of a whole (non-streamed) answer is still connected, checked between tokens
// so an answer nobody waits for stops (a stream finds out by its failing writes).
//
// cpp-httplib 0.11 gives handlers neither the socket nor a disconnect check, but it does give the
// connection's two addresses (Request::local_addr/port, remote_addr/port). While a handler runs,
// httplib keeps that connection open, so exactly one socket of the process has those two
// addresses: find() looks it up among the process's descriptors (Linux: /proc/self/fd) once per
// request, and gone() polls it without reading anything.
//
// Goals: never a false "gone" for a client that is waiting; no effect on what httplib reads or
// writes. Non-goals: clients that half-close their side after sending the request and still read
// the answer (HTTP allows it, few clients do it): they count as gone, their answer is stopped.
#pragma once

#include <optional>
#include <string>

namespace flashdesk::server {

struct SocketAddress {
  std::string ip;  // numeric, as getnameinfo(NI_NUMERICHOST) writes it (httplib does the same)
  int port = -1;
};

class ClientConnection {
 public:
  // The open socket with these two addresses; nullopt when none (then nothing can be checked).
  static std::optional<ClientConnection> find(const SocketAddress& local,
                                              const SocketAddress& remote);
  // True when the client has closed or reset the connection (poll: hang-up, error, or its side
  // shut); false while it waits, even if it has already sent its next request.
  bool gone() const;

 private:
  explicit ClientConnection(int fd) : fd_(fd) {}
  int fd_;  // owned by httplib: never closed here
};

}  // namespace flashdesk::server
