// gatescope-perf's REST client without a server: reading HTTP statuses back as the codes
// the server's REST API answered them for, and the endpoint's address and options.
#include "client/perf/rest_client.h"

#include <gtest/gtest.h>

#include "server/frontend/http/rest_api.h"

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
  EXPECT_EQ(StatusCodeOfHttp(405), absl::StatusCode::kUnknown);            // wrong method
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
  EXPECT_EQ(v4->tls, nullptr);
  EXPECT_TRUE(v4->token.empty());
  absl::StatusOr<RestEndpoint> v6 = OpenRestEndpoint(At("[::1]:8443"));
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, "8443");
}

TEST(OpenRestEndpointTest, RefusesAnAddressWithoutAPortAndOptionsThatDoNotFit) {
  for (const char* address : {"localhost", "localhost:", ":8000"}) {
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

TEST(RestClientTest, ANothingListeningPortIsUnavailable) {
  // Port 1 on loopback: nothing listens there unprivileged.
  absl::StatusOr<RestEndpoint> endpoint = OpenRestEndpoint(At("127.0.0.1:1"));
  ASSERT_TRUE(endpoint.ok());
  RestClient client(*endpoint);
  absl::StatusOr<RestReply> reply =
      client.Call(boost::beast::http::verb::get, "/v2/health/live", "", {}, 2000);
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnavailable) << reply.status();
}

}  // namespace
}  // namespace gatescope::perf
