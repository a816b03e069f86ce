#include "server/listen_socket.h"

#include <fmt/format.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tq::server {

void ListenSocketOptions(int fd) {
  int yes = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

std::string BindFailureReason(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* list = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &list);
  if (rc != 0) return fmt::format("cannot resolve host '{}': {}", host, ::gai_strerror(rc));
  int err = 0;
  for (addrinfo* a = list; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    ListenSocketOptions(fd);
    const bool ok = ::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 1) == 0;
    if (!ok) err = errno;
    ::close(fd);
    if (ok) {
      err = 0;
      break;
    }
  }
  ::freeaddrinfo(list);
  switch (err) {
    case 0:
      return "";
    case EADDRINUSE:
      return fmt::format("port {} is in use (another program listens on {}:{})", port, host, port);
    case EADDRNOTAVAIL:
      return fmt::format("address {} is not an address of this machine", host);
    case EACCES:
      return fmt::format("port {} needs privileges (ports below 1024 are reserved)", port);
    default:
      return std::strerror(err);
  }
}

}  // namespace tq::server
