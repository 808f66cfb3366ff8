// Finding a request's socket by its addresses, and polling it for the client's hang-up
// (client_connection.h).
#include "app/server/client_connection.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <array>
#include <cstdlib>
#include <filesystem>

namespace flashdesk::server {
namespace {

// What getsockname / getpeername say for `fd`, as httplib writes it for a request.
std::optional<SocketAddress> address_of(int fd, bool peer) {
  sockaddr_storage addr{};
  socklen_t length = sizeof addr;
  auto* raw = reinterpret_cast<sockaddr*>(&addr);
  if ((peer ? ::getpeername(fd, raw, &length) : ::getsockname(fd, raw, &length)) != 0) return {};
  SocketAddress out;
  if (addr.ss_family == AF_INET)
    out.port = ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
  else if (addr.ss_family == AF_INET6)
    out.port = ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  else
    return {};
  std::array<char, NI_MAXHOST> ip{};
  if (::getnameinfo(raw, length, ip.data(), ip.size(), nullptr, 0, NI_NUMERICHOST) != 0) return {};
  out.ip = ip.data();
  return out;
}

bool same(const std::optional<SocketAddress>& a, const SocketAddress& b) {
  return a && a->port == b.port && a->ip == b.ip;
}

}  // namespace

std::optional<ClientConnection> ClientConnection::find(const SocketAddress& local,
                                                       const SocketAddress& remote) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    const int fd = std::atoi(entry.path().filename().c_str());
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    if (same(address_of(fd, false), local) && same(address_of(fd, true), remote))
      return ClientConnection(fd);
  }
  return std::nullopt;
}

bool ClientConnection::gone() const {
  pollfd p{.fd = fd_, .events = POLLRDHUP, .revents = 0};
  if (::poll(&p, 1, 0) < 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace flashdesk::server
