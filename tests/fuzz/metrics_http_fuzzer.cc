// libFuzzer harness: any bytes as what a peer sends the /metrics endpoint, parsed with the
// endpoint's limits by Beast's request parser, fed in two pieces as a network might deliver
// them, then answered both without and with access control. Must end in a response or a
// parse error, never a crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include <boost/asio/buffer.hpp>
#include <prometheus/counter.h>

#include "server/metrics/metrics_http_handler.h"

namespace {

gatescope::MetricsEndpoint Endpoint(bool guarded) {
  static auto registry = [] {
    auto r = std::make_shared<prometheus::Registry>();
    prometheus::BuildCounter().Name("fuzz_total").Help("h").Register(*r).Add({}).Increment();
    return r;
  }();
  static std::unique_ptr<gatescope::AccessControl> access = [] {
    const std::string path = "/tmp/gatescope_metrics_fuzz_tokens";
    std::ofstream(path) << "fuzz-token-0123456789abcdef\n";
    gatescope::AccessOptions options;
    options.tokens_file = path;
    return gatescope::AccessControl::Load(options).value();
  }();
  return {registry, nullptr, guarded ? access.get() : nullptr};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const gatescope::MetricsEndpoint open = Endpoint(false);
  static const gatescope::MetricsEndpoint guarded = Endpoint(true);
  boost::beast::http::request_parser<boost::beast::http::string_body> parser;
  gatescope::LimitMetricsRequest(parser);
  parser.eager(true);
  boost::beast::error_code ec;
  const size_t half = size / 2;
  std::string pending(reinterpret_cast<const char*>(data), half);
  for (int piece = 0; piece < 2 && !ec && !parser.is_done(); ++piece) {
    if (piece == 1) pending.append(reinterpret_cast<const char*>(data) + half, size - half);
    while (!pending.empty() && !ec && !parser.is_done()) {
      const size_t used = parser.put(boost::asio::buffer(pending), ec);
      if (ec == boost::beast::http::error::need_more) {
        ec = {};
        break;
      }
      pending.erase(0, used);
      if (used == 0) break;
    }
  }
  if (!ec && parser.is_done()) {
    (void)gatescope::AnswerMetricsRequest(parser.get(), open);
    (void)gatescope::AnswerMetricsRequest(parser.get(), guarded);
  }
  return 0;
}
