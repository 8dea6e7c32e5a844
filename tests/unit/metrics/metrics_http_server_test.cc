// The /metrics endpoint over real loopback sockets: answers, keep-alive, refusals, and the
// slow-client attacks the one-connection-at-a-time endpoint fell for.
#include "server/metrics/metrics_http_server.h"

#include <gtest/gtest.h>
#include <prometheus/counter.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "tests/unit/http/loopback_client.h"

namespace gatescope {
namespace {

using loopback::Connect;
using loopback::ReadResponse;
using loopback::Send;

using Clock = std::chrono::steady_clock;

std::string Get(int port, const std::string& extra_headers = "") {
  const int fd = Connect(port);
  Send(fd, "GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n" + extra_headers + "\r\n");
  std::string r = ReadResponse(fd);
  close(fd);
  return r;
}

struct Fixture {
  explicit Fixture(const AccessControl* access = nullptr) {
    auto& family = prometheus::BuildCounter().Name("test_scrapes_total").Help("h").Register(*registry);
    counter = &family.Add({});
    MetricsHttpOptions options;
    options.before_scrape = [this] { counter->Increment(); };
    options.access = access;
    server = MetricsHttpServer::Start("127.0.0.1", 0, registry, std::move(options)).value();
  }
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  prometheus::Counter* counter = nullptr;
  std::unique_ptr<MetricsHttpServer> server;
};

TEST(MetricsHttpServer, ServesMetricsAndRefusesOtherRequests) {
  Fixture f;
  const std::string ok = Get(f.server->port());
  EXPECT_EQ(ok.rfind("HTTP/1.1 200 OK", 0), 0u) << ok;
  EXPECT_NE(ok.find("test_scrapes_total 1"), std::string::npos) << ok;  // before_scrape ran
  const int fd = Connect(f.server->port());
  Send(fd, "POST /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
  EXPECT_EQ(ReadResponse(fd).rfind("HTTP/1.1 405", 0), 0u);
  close(fd);
  const int other = Connect(f.server->port());
  Send(other, "GET /other HTTP/1.1\r\nHost: t\r\n\r\n");
  EXPECT_EQ(ReadResponse(other).rfind("HTTP/1.1 404", 0), 0u);
  close(other);
  const int garbage = Connect(f.server->port());
  Send(garbage, "\x01\x02 not http at all\r\n\r\n");
  EXPECT_EQ(ReadResponse(garbage).rfind("HTTP/1.1 400", 0), 0u);
  close(garbage);
}

TEST(MetricsHttpServer, KeepAliveServesSeveralRequestsOnOneConnection) {
  Fixture f;
  const int fd = Connect(f.server->port());
  for (int i = 1; i <= 3; ++i) {
    Send(fd, "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
    const std::string r = ReadResponse(fd);
    EXPECT_NE(r.find("test_scrapes_total " + std::to_string(i)), std::string::npos) << r;
  }
  close(fd);
}

TEST(MetricsHttpServer, TokensAreCheckedWhenAccessControlIsOn) {
  const std::string path = ::testing::TempDir() + "/metrics_tokens";
  std::ofstream(path) << "scrape-token-0123456789\n";
  AccessOptions options;
  options.tokens_file = path;
  auto access = AccessControl::Load(options).value();
  Fixture f(access.get());
  const std::string refused = Get(f.server->port());
  EXPECT_EQ(refused.rfind("HTTP/1.1 401", 0), 0u) << refused;
  EXPECT_NE(refused.find("WWW-Authenticate: Bearer"), std::string::npos);
  EXPECT_EQ(Get(f.server->port(), "Authorization: Bearer wrong-token-0123456789\r\n")
                .rfind("HTTP/1.1 401", 0), 0u);
  EXPECT_EQ(Get(f.server->port(), "Authorization: Bearer scrape-token-0123456789\r\n")
                .rfind("HTTP/1.1 200", 0), 0u);
}

// Sixty peers that connect and send half a request head (slowloris) or nothing: a scrape
// is still answered at once (the old endpoint served one connection at a time, 2 s each:
// 120 s), and each silent peer is disconnected after the read timeout.
TEST(MetricsHttpServer, SlowAndSilentPeersDoNotDelayAScrape) {
  Fixture f;
  std::vector<int> slow;
  for (int i = 0; i < 60; ++i) {
    slow.push_back(Connect(f.server->port()));
    if (i % 2 == 0) Send(slow.back(), "GET /metrics HTTP/1.1\r\nX-Slow: ");
  }
  const auto start = Clock::now();
  const std::string ok = Get(f.server->port());
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(ok.rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_LT(took, 1.0) << "a scrape waited behind slow peers for " << took << " s";
  // Within the read timeout plus a margin, every slow peer sees its connection closed.
  const int limit_ms = static_cast<int>(absl::ToInt64Milliseconds(MetricsHttpServer::kReadTimeout)) + 3000;
  for (int fd : slow) {
    char byte;
    pollfd p{fd, POLLIN, 0};
    ASSERT_EQ(poll(&p, 1, limit_ms), 1);
    EXPECT_LE(recv(fd, &byte, 1, 0), 0);  // closed (0) or reset (-1), nothing sent
    close(fd);
  }
}

// Both a connection the server is serving (one scrape answered, kept alive) and one it may
// not have accepted yet are closed by Stop at once.
TEST(MetricsHttpServer, StopClosesOpenConnections) {
  Fixture f;
  const int served = Connect(f.server->port());
  Send(served, "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
  ASSERT_EQ(ReadResponse(served).rfind("HTTP/1.1 200", 0), 0u);
  const int fresh = Connect(f.server->port());
  const auto start = Clock::now();
  f.server->Stop();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 1.0);
  for (int fd : {served, fresh}) {
    char byte;
    pollfd p{fd, POLLIN, 0};
    ASSERT_EQ(poll(&p, 1, 2000), 1);
    EXPECT_LE(recv(fd, &byte, 1, 0), 0);
    close(fd);
  }
}

}  // namespace
}  // namespace gatescope
