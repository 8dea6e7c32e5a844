// A minimal blocking HTTP/1.1 client over loopback sockets for the HTTP servers' tests: raw
// bytes out, whole responses (head and Content-Length body) in. Test-only.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

namespace gatescope::loopback {

inline int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

inline void Send(int fd, const std::string& text) {
  ASSERT_EQ(send(fd, text.data(), text.size(), MSG_NOSIGNAL), static_cast<ssize_t>(text.size()));
}

// Reads until `done(data)` holds, or a timeout or close; returns what arrived.
template <typename Done>
std::string ReadUntil(int fd, Done done, int timeout_ms = 5000) {
  std::string data;
  char buf[4096];
  while (!done(data)) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) break;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  return data;
}

// One whole response (head + Content-Length body); "" on timeout or close before one.
inline std::string ReadResponse(int fd, int timeout_ms = 5000) {
  auto whole = [](const std::string& d) -> size_t {  // its length, 0 while incomplete
    const size_t end = d.find("\r\n\r\n");
    if (end == std::string::npos) return 0;
    const size_t cl = d.find("Content-Length: ");
    const size_t length = cl == std::string::npos || cl > end ? 0 : std::stoul(d.substr(cl + 16));
    return d.size() >= end + 4 + length ? end + 4 + length : 0;
  };
  const std::string data =
      ReadUntil(fd, [&](const std::string& d) { return whole(d) > 0; }, timeout_ms);
  const size_t n = whole(data);
  return n > 0 ? data.substr(0, n) : "";
}

}  // namespace gatescope::loopback
