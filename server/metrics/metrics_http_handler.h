// What /metrics answers to one parsed request, apart from the connection handling
// (server/http) so that it can be fuzzed without sockets.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include <prometheus/registry.h>

#include "server/auth/access_control.h"
#include "server/http/http_server.h"

namespace gatescope {

struct MetricsEndpoint {
  std::shared_ptr<prometheus::Registry> registry;
  std::function<void()> before_scrape;  // may be empty
  const AccessControl* access = nullptr;  // not owned; null: open
};

// The limits a request is parsed with: heads up to 8 KiB, no body (GET only). The server
// (HttpServerOptions) and the fuzzer (LimitMetricsRequest) both take them from here.
inline constexpr uint32_t kMetricsHeaderLimit = 8192;
inline constexpr uint64_t kMetricsBodyLimit = 0;
inline void LimitMetricsRequest(http::request_parser<http::string_body>& parser) {
  parser.header_limit(kMetricsHeaderLimit);
  parser.body_limit(kMetricsBodyLimit);
}

// GET /metrics (or /metrics?...): 200 with the text format, or 401 when `access` refuses the
// request's Authorization; another method: 405; another path: 404. The response is complete
// (payload prepared); the caller sets keep-alive. Runs `before_scrape` before collecting.
http::response<http::string_body> AnswerMetricsRequest(
    const HttpRequest& request, const MetricsEndpoint& endpoint);

}  // namespace gatescope
