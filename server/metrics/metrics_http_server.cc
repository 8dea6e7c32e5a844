#include "server/metrics/metrics_http_server.h"

#include <prometheus/text_serializer.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/metrics/metrics_http_handler.h"

namespace gatescope {

http::response<http::string_body> AnswerMetricsRequest(const HttpRequest& request,
                                                       const MetricsEndpoint& endpoint) {
  const int version = request.version();
  auto reply = [version](http::status status, std::string body) {
    http::response<http::string_body> r{status, version};
    r.set(http::field::content_type, "text/plain");
    r.body() = std::move(body);
    return r;
  };
  const absl::string_view target(request.target().data(), request.target().size());
  http::response<http::string_body> r;
  if (request.method() != http::verb::get) {
    r = reply(http::status::method_not_allowed, "GET only\n");
    r.set(http::field::allow, "GET");
  } else if (target != "/metrics" && !absl::StartsWith(target, "/metrics?")) {
    r = reply(http::status::not_found, "see /metrics\n");
  } else {
    absl::Status allowed = absl::OkStatus();
    if (endpoint.access != nullptr) {
      const auto header = request[http::field::authorization];
      allowed = endpoint.access->Check(absl::string_view(header.data(), header.size()),
                                       Access::kMetrics);
    }
    if (!allowed.ok()) {
      r = reply(http::status::unauthorized, absl::StrCat(allowed.message(), "\n"));
      r.set(http::field::www_authenticate, "Bearer realm=\"gatescope\"");
    } else {
      if (endpoint.before_scrape) endpoint.before_scrape();
      r = reply(http::status::ok,
                prometheus::TextSerializer().Serialize(endpoint.registry->Collect()));
      r.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
    }
  }
  r.prepare_payload();
  return r;
}

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& host, int port, std::shared_ptr<prometheus::Registry> registry,
    MetricsHttpOptions options) {
  auto endpoint = std::make_shared<const MetricsEndpoint>(
      MetricsEndpoint{std::move(registry), std::move(options.before_scrape), options.access});
  HttpServerOptions http;
  http.name = "metrics";
  http.https = std::move(options.https);
  http.header_limit = kMetricsHeaderLimit;
  http.body_limit = kMetricsBodyLimit;  // GET only
  http.request_timeout = kReadTimeout;
  http.write_timeout = kWriteTimeout;
  http.max_connections = kMaxConnections;
  auto server = HttpServer::Start(
      host, port,
      [endpoint](HttpRequest request, HttpRespond respond) {
        respond(AnswerMetricsRequest(request, *endpoint));
      },
      std::move(http));
  if (!server.ok()) return server.status();
  return std::unique_ptr<MetricsHttpServer>(new MetricsHttpServer(*std::move(server)));
}

}  // namespace gatescope
