#include "client/cli_checks.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <sstream>

namespace gatescope::client {
namespace {

std::string NumberText(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

}  // namespace

CLI::Validator IntegerIn(int64_t lo, int64_t hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0' || errno == ERANGE || v < lo || v > hi) {
          return "'" + text + "' is not an integer in " + range;
        }
        return {};
      },
      range);
}

CLI::Validator NumberIn(double lo, double hi, bool hi_open) {
  const std::string range = "[" + NumberText(lo) + ", " + NumberText(hi) + (hi_open ? ")" : "]");
  return CLI::Validator(
      [lo, hi, hi_open, range](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || !std::isfinite(v) || v < lo || v > hi ||
            (hi_open && v == hi)) {
          return "'" + text + "' is not a number in " + range;
        }
        return {};
      },
      range);
}

void AddConnectionFlags(CLI::App& app, ConnectionOptions& options) {
  app.add_option("--server", options.server,
                 "gRPC address of the gatescope server (HOST:PORT, or unix:PATH for its "
                 "--grpc_unix_socket)");
  app.add_option("--tls-ca", options.tls_ca,
                 "use TLS, verifying the server with these PEM root certificates "
                 "(default: an insecure channel)")
      ->type_name("FILE");
  app.add_option("--tls-cert", options.tls_cert,
                 "mutual TLS: PEM client certificate (needs --tls-key and --tls-ca)")
      ->type_name("FILE");
  app.add_option("--tls-key", options.tls_key, "mutual TLS: PEM private key of --tls-cert")
      ->type_name("FILE");
  app.add_option("--tls-server-name", options.tls_server_name,
                 "name checked against the server's certificate (default: the --server host; "
                 "needs --tls-ca)")
      ->type_name("NAME");
  app.add_option("--token-file", options.token_file,
                 "send the bearer token in this file (its first non-empty line, not a # comment) "
                 "on every call")
      ->type_name("FILE")
      ->envname(kTokenFileEnv);
}

std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    return UsageError(app, e.what());
  }
}

int UsageError(const CLI::App& app, const std::string& reason) {
  std::cerr << app.get_name() << ": " << reason << "\n"
            << "Run with --help for more information.\n";
  return kUsageError;
}

}  // namespace gatescope::client
