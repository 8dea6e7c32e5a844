// HttpServer over real loopback sockets: answers given later from another thread, Stop
// waiting for answers in flight, Expect: 100-continue, and the limits' statuses.
#include "server/http/http_server.h"

#include <gtest/gtest.h>
#include <netinet/tcp.h>

#include <atomic>
#include <optional>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "tests/unit/http/loopback_client.h"

namespace gatescope {
namespace {

using loopback::Connect;
using loopback::ReadResponse;
using loopback::ReadUntil;
using loopback::Send;

HttpServerOptions Limits(uint64_t body, uint32_t header = 8192) {
  HttpServerOptions o;
  o.body_limit = body;
  o.header_limit = header;
  return o;
}

HttpResponse Echo(const HttpRequest& r) {
  HttpResponse out{http::status::ok, r.version()};
  out.body() = std::string(r.target()) + ":" + r.body();
  return out;
}

TEST(HttpServer, AnswersFromAnotherThreadAndKeepsTheConnection) {
  std::vector<std::thread> workers;
  absl::Mutex mu;
  auto server = HttpServer::Start("127.0.0.1", 0,
                                  [&](HttpRequest request, HttpRespond respond) {
                                    absl::MutexLock lock(&mu);
                                    workers.emplace_back([request = std::move(request),
                                                          respond = std::move(respond)] {
                                      std::this_thread::sleep_for(std::chrono::milliseconds(20));
                                      respond(Echo(request));
                                    });
                                  },
                                  Limits(1024))
                    .value();
  const int fd = Connect(server->port());
  for (const char* body : {"one", "two"}) {
    Send(fd, absl::StrCat("POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: ", strlen(body),
                          "\r\n\r\n", body));
    const std::string r = ReadResponse(fd);
    EXPECT_NE(r.find("200 OK"), std::string::npos) << r;
    EXPECT_NE(r.find(absl::StrCat("/x:", body)), std::string::npos) << r;
  }
  close(fd);
  server->Stop();
  for (auto& t : workers) t.join();
}

TEST(HttpServer, StopWaitsForAnswersInFlight) {
  absl::Notification handed;
  HttpRespond pending;
  auto server = HttpServer::Start("127.0.0.1", 0,
                                  [&](HttpRequest, HttpRespond respond) {
                                    pending = std::move(respond);
                                    handed.Notify();
                                  })
                    .value();
  const int fd = Connect(server->port());
  Send(fd, "GET /slow HTTP/1.1\r\nHost: t\r\n\r\n");
  handed.WaitForNotification();
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    server->Stop();
    stopped = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(stopped.load());  // the answer is still owed
  HttpResponse answer{http::status::ok, 11};
  answer.body() = "late but delivered";
  pending(std::move(answer));
  const std::string r = ReadResponse(fd);
  EXPECT_NE(r.find("late but delivered"), std::string::npos) << r;
  stopper.join();
  EXPECT_TRUE(stopped.load());
  close(fd);
}

TEST(HttpServer, ExpectContinueThenBody) {
  auto server = HttpServer::Start("127.0.0.1", 0,
                                  [](HttpRequest request, HttpRespond respond) {
                                    respond(Echo(request));
                                  },
                                  Limits(1024))
                    .value();
  const int fd = Connect(server->port());
  Send(fd, "POST /c HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
  const std::string interim = ReadUntil(fd, [](const std::string& d) {
    return d.find("\r\n\r\n") != std::string::npos;
  });
  EXPECT_NE(interim.find("100 Continue"), std::string::npos) << interim;
  Send(fd, "hello");
  const std::string r = ReadResponse(fd);
  EXPECT_NE(r.find("/c:hello"), std::string::npos) << r;
  close(fd);
  // Too large for the limit: 413 at once, no 100.
  const int big = Connect(server->port());
  Send(big, "POST /c HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n");
  const std::string refused = ReadResponse(big);
  EXPECT_NE(refused.find("413"), std::string::npos) << refused;
  close(big);
}

TEST(HttpServer, LimitsAnswerWithTheirStatuses) {
  std::atomic<int> handled{0};
  auto server = HttpServer::Start("127.0.0.1", 0,
                                  [&](HttpRequest request, HttpRespond respond) {
                                    ++handled;
                                    respond(Echo(request));
                                  },
                                  Limits(16, 512))
                    .value();
  auto one = [&](const std::string& text) {
    const int fd = Connect(server->port());
    Send(fd, text);
    std::string r = ReadResponse(fd);
    close(fd);
    return r;
  };
  EXPECT_NE(one("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 17\r\n\r\n" + std::string(17, 'x'))
                .find("413"),
            std::string::npos);
  EXPECT_NE(one("GET / HTTP/1.1\r\nHost: t\r\nX: " + std::string(600, 'y') + "\r\n\r\n")
                .find("431"),
            std::string::npos);
  EXPECT_NE(one("NOT HTTP AT ALL\r\n\r\n").find("400"), std::string::npos);
  EXPECT_EQ(handled.load(), 0);
  EXPECT_NE(one("POST /ok HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi").find("/ok:hi"),
            std::string::npos);
  EXPECT_EQ(handled.load(), 1);
}

TEST(HttpServer, AHandlerThatDropsItsAnswerStillAnswers500) {
  auto server = HttpServer::Start("127.0.0.1", 0, [](HttpRequest, HttpRespond respond) {
                  HttpRespond copy = respond;  // copies share one answer; none is called
                }).value();
  const int fd = Connect(server->port());
  Send(fd, "GET /x HTTP/1.1\r\nHost: t\r\n\r\n");
  EXPECT_NE(ReadResponse(fd).find("500"), std::string::npos);
  close(fd);
  server->Stop();  // nothing owed: returns
}

TEST(HttpServer, HeadCheckRefusesBeforeTheBodyAndTheBudgetBoundsBodies) {
  std::vector<HttpRespond> held;  // answers kept back, so their bodies stay reserved
  absl::Mutex mu;
  HttpServerOptions options = Limits(1000);
  options.memory_bytes = 100;
  options.check_head = [](const HttpRequest& head) -> std::optional<HttpResponse> {
    if (head[http::field::authorization] == "ok") return std::nullopt;
    return HttpResponse{http::status::unauthorized, head.version()};
  };
  auto server = HttpServer::Start("127.0.0.1", 0,
                                  [&](HttpRequest, HttpRespond respond) {
                                    absl::MutexLock lock(&mu);
                                    held.push_back(std::move(respond));
                                  },
                                  options)
                    .value();
  // Refused on its head: the 900 body bytes are never sent, the answer comes anyway.
  const int refused = Connect(server->port());
  Send(refused, "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 900\r\n\r\n");
  EXPECT_NE(ReadResponse(refused).find("401"), std::string::npos);
  close(refused);
  auto post = [&](int bytes) {
    const int fd = Connect(server->port());
    Send(fd, absl::StrCat("POST / HTTP/1.1\r\nHost: t\r\nAuthorization: ok\r\n"
                          "Content-Length: ", bytes, "\r\n\r\n", std::string(bytes, 'b')));
    return fd;
  };
  const int first = post(80);  // held by the handler: 80 of 100 bytes reserved
  for (int i = 0; i < 200; ++i) {
    {
      absl::MutexLock lock(&mu);
      if (held.size() == 1) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const int second = post(50);  // 80 + 50 > 100
  EXPECT_NE(ReadResponse(second).find("503"), std::string::npos);
  close(second);
  {
    absl::MutexLock lock(&mu);
    ASSERT_EQ(held.size(), 1u);
    held[0](HttpResponse{http::status::ok, 11});
  }
  EXPECT_NE(ReadResponse(first).find("200"), std::string::npos);
  close(first);
  const int third = post(50);  // released once the first answer was written
  {
    for (int i = 0; i < 200; ++i) {
      {
        absl::MutexLock lock(&mu);
        if (held.size() == 2) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    absl::MutexLock lock(&mu);
    ASSERT_EQ(held.size(), 2u);
    held[1](HttpResponse{http::status::ok, 11});
  }
  EXPECT_NE(ReadResponse(third).find("200"), std::string::npos);
  close(third);
}

// The server's end of a loopback connection, found among this process's descriptors by its
// two ports; -1 if none.
int ServerEndOf(int client_fd, int server_port) {
  sockaddr_in mine{};
  socklen_t len = sizeof(mine);
  getsockname(client_fd, reinterpret_cast<sockaddr*>(&mine), &len);
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    int fd = -1;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &fd) || fd == client_fd) continue;
    sockaddr_in local{}, peer{};
    socklen_t l = sizeof(local), p = sizeof(peer);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &l) != 0 ||
        getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &p) != 0 ||
        local.sin_family != AF_INET) {
      continue;
    }
    if (ntohs(local.sin_port) == server_port && peer.sin_port == mine.sin_port) return fd;
  }
  return -1;
}

int NoDelay(int fd) {
  int on = -1;
  socklen_t len = sizeof(on);
  EXPECT_EQ(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, &len), 0);
  return on;
}

TEST(HttpServer, AcceptedConnectionsSendWithoutNagleDelay) {
  // Answers are written whole; with Nagle's algorithm a new TLS connection's first answer
  // waited for the client's delayed ACK of the session tickets (about 40 ms).
  auto server = HttpServer::Start("127.0.0.1", 0, [](HttpRequest request, HttpRespond respond) {
                  respond(Echo(request));
                }).value();
  const int fd = Connect(server->port());
  Send(fd, "GET /x HTTP/1.1\r\nHost: t\r\n\r\n");
  ASSERT_NE(ReadResponse(fd).find("200 OK"), std::string::npos);  // accepted by now
  const int server_end = ServerEndOf(fd, server->port());
  ASSERT_GE(server_end, 0);
  EXPECT_NE(NoDelay(server_end), 0);
  EXPECT_EQ(NoDelay(fd), 0);  // the client's end, left as the system made it
  close(fd);
  server->Stop();
}

TEST(HttpServer, RefusesBadHostsAndTakenPorts) {
  auto handler = [](HttpRequest, HttpRespond respond) { respond(HttpResponse{}); };
  EXPECT_EQ(HttpServer::Start("example.com", 0, handler).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto first = HttpServer::Start("127.0.0.1", 0, handler).value();
  EXPECT_EQ(HttpServer::Start("127.0.0.1", first->port(), handler).status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace gatescope
