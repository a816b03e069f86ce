// The listening socket's options and the reason a bind failed, for HttpServer::Bind.
//
// cpp-httplib's default socket options set SO_REUSEPORT, which lets a second process bind the
// same address and port and take a share of the connections (an unauthenticated server could
// answer requests meant for one started with --api-key). We set SO_REUSEADDR only: a restarted
// server can bind over connections in TIME_WAIT, but never next to a listening socket.
#pragma once

#include <string>

namespace tq::server {

// The options every listening socket gets (httplib::Server::set_socket_options).
void ListenSocketOptions(int fd);

// Why host:port cannot be bound, from a probe bind with the same options: "port 8080 is in use
// (another server is listening on 127.0.0.1:8080)", "address 10.1.2.3 is not on this machine",
// "port 80 needs privileges" ...; "" when the probe binds (the failure was elsewhere).
std::string BindFailureReason(const std::string& host, int port);

}  // namespace tq::server
