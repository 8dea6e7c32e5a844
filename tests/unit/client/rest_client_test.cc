// gatescope-perf's REST client without a server: reading HTTP statuses back as the codes
// the server's REST API answered them for, and the endpoint's address and options.
#include "client/perf/rest_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "server/frontend/http/rest_api.h"
#include "server/http/http_server.h"

namespace gatescope::perf {
namespace {

// Every code the server can answer with comes back as one the server maps to the same
// HTTP status: the two tables agree.
TEST(StatusCodeOfHttpTest, ReadsBackEveryStatusTheServerAnswersWith) {
  for (int c = 0; c <= 16; ++c) {
    const auto code = static_cast<absl::StatusCode>(c);
    const int status = static_cast<int>(HttpStatusOf(code));
    EXPECT_EQ(HttpStatusOf(StatusCodeOfHttp(status)), HttpStatusOf(code))
        << absl::StatusCodeToString(code) << " -> HTTP " << status;
  }
  EXPECT_EQ(StatusCodeOfHttp(200), absl::StatusCode::kOk);
  EXPECT_EQ(StatusCodeOfHttp(404), absl::StatusCode::kNotFound);
  EXPECT_EQ(StatusCodeOfHttp(401), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(StatusCodeOfHttp(504), absl::StatusCode::kDeadlineExceeded);
}

TEST(StatusCodeOfHttpTest, StatusesOfTheHttpLayerItself) {
  EXPECT_EQ(StatusCodeOfHttp(413), absl::StatusCode::kResourceExhausted);  // body too large
  EXPECT_EQ(StatusCodeOfHttp(431), absl::StatusCode::kResourceExhausted);  // head too large
  EXPECT_EQ(StatusCodeOfHttp(405), absl::StatusCode::kUnimplemented);      // wrong method
  EXPECT_EQ(StatusCodeOfHttp(502), absl::StatusCode::kInternal);
  EXPECT_EQ(StatusCodeOfHttp(302), absl::StatusCode::kUnknown);
}

client::ConnectionOptions At(const std::string& server) {
  client::ConnectionOptions options;
  options.server = server;
  return options;
}

TEST(OpenRestEndpointTest, SplitsHostAndPort) {
  absl::StatusOr<RestEndpoint> v4 = OpenRestEndpoint(At("127.0.0.1:8000"));
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, "8000");
  EXPECT_EQ(v4->authority, "127.0.0.1:8000");
  EXPECT_EQ(v4->tls, nullptr);
  EXPECT_TRUE(v4->token.empty());
  absl::StatusOr<RestEndpoint> v6 = OpenRestEndpoint(At("[::1]:8443"));
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, "8443");
  EXPECT_EQ(v6->authority, "[::1]:8443");
}

TEST(OpenRestEndpointTest, RefusesAnAddressWithoutAPortAndOptionsThatDoNotFit) {
  for (const char* address : {"localhost", "localhost:", ":8000", "[::1]", "::1", "::1:8000",
                              "[::1]:", "[]:8000"}) {
    absl::StatusOr<RestEndpoint> e = OpenRestEndpoint(At(address));
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument) << address;
  }
  client::ConnectionOptions options = At("127.0.0.1:8000");
  options.tls_cert = "client.crt";
  EXPECT_EQ(OpenRestEndpoint(options).status().code(), absl::StatusCode::kInvalidArgument);
  options = At("127.0.0.1:8000");
  options.tls_ca = "/nonexistent/ca.crt";
  absl::StatusOr<RestEndpoint> e = OpenRestEndpoint(options);
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("--tls-ca"), std::string::npos) << e.status();
}

TEST(RestClientTest, APortNothingListensOnIsUnavailable) {
  // Port 1 on loopback: nothing listens there unprivileged.
  absl::StatusOr<RestEndpoint> endpoint = OpenRestEndpoint(At("127.0.0.1:1"));
  ASSERT_TRUE(endpoint.ok());
  RestClient client(*endpoint);
  absl::StatusOr<RestReply> reply =
      client.Call(boost::beast::http::verb::get, "/v2/health/live", "", {}, 2000);
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnavailable) << reply.status();
}

// A server that closes connections idle for 100 ms and counts the requests it is handed.
struct CountingServer {
  std::atomic<int> requests{0};
  std::unique_ptr<HttpServer> server;

  explicit CountingServer(bool answer) {
    HttpServerOptions options;
    options.request_timeout = absl::Milliseconds(100);
    options.body_limit = 1024;
    server = HttpServer::Start("127.0.0.1", 0,
                               [this, answer](HttpRequest request, HttpRespond respond) {
                                 const int n = ++requests;
                                 if (!answer) return;  // dropped: the client gets 500
                                 HttpResponse r{boost::beast::http::status::ok, request.version()};
                                 r.body() = std::to_string(n) + ":" + request.body();
                                 respond(std::move(r));
                               },
                               options)
                 .value();
  }
  RestEndpoint Endpoint() const {
    return OpenRestEndpoint(At("127.0.0.1:" + std::to_string(server->port()))).value();
  }
};

TEST(RestClientTest, SendsAgainOnceWhenTheServerClosedTheIdleConnection) {
  CountingServer counting(/*answer=*/true);
  const RestEndpoint endpoint = counting.Endpoint();
  RestClient client(endpoint);
  using boost::beast::http::verb;
  absl::StatusOr<RestReply> first = client.Call(verb::post, "/x", "a", {}, 2000);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->status, 200);
  EXPECT_EQ(first->body, "1:a");
  absl::StatusOr<RestReply> kept = client.Call(verb::post, "/x", "b", {}, 2000);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->body, "2:b");
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // the server closes it
  absl::StatusOr<RestReply> after = client.Call(verb::post, "/x", "c", {}, 2000);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->body, "3:c");
  EXPECT_EQ(counting.requests.load(), 3);  // each request run once
}

TEST(RestClientTest, AnswersTheServerGaveUpOnAreNotSentAgain) {
  CountingServer counting(/*answer=*/false);  // every request answered 500
  const RestEndpoint endpoint = counting.Endpoint();
  RestClient client(endpoint);
  for (int i = 1; i <= 2; ++i) {
    absl::StatusOr<RestReply> reply =
        client.Call(boost::beast::http::verb::post, "/x", "a", {}, 2000);
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_EQ(reply->status, 500);
    EXPECT_EQ(StatusCodeOfHttp(reply->status), absl::StatusCode::kInternal);
    EXPECT_EQ(counting.requests.load(), i);
  }
}

}  // namespace
}  // namespace gatescope::perf
