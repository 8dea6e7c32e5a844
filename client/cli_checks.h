// What gatescope-client and gatescope-perf share about their command lines (CLI11): value
// checks whose ranges show in --help, and one way of ending on a usage error.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "client/options.h"

namespace gatescope::client {

// Exit status of a usage error: an unknown flag, a value that does not parse or is out of
// range, a missing required flag or input.
inline constexpr int kUsageError = 2;

// Checks of a flag's text, before CLI11 converts it: an integer in [lo, hi]; a number in
// [lo, hi] (or [lo, hi) when `hi_open`). Shown in --help as ":[lo, hi]".
CLI::Validator IntegerIn(int64_t lo, int64_t hi);
CLI::Validator NumberIn(double lo, double hi, bool hi_open = false);

// A comma-separated list flag (e.g. --layers 0,2; repeating the flag appends). It takes one
// argument per use, so it never swallows the inputs that follow it.
template <typename T>
CLI::Option* AddList(CLI::App& app, const std::string& name, std::vector<T>& values,
                     const std::string& description) {
  return app.add_option(name, values, description)
      ->delimiter(',')
      ->allow_extra_args(false)
      ->default_str("");
}

// --server, the TLS flags (--tls-ca, --tls-cert, --tls-key, --tls-server-name) and
// --token-file (default: $GATESCOPE_TOKEN_FILE) into `options`. Their combination and
// files are checked by OpenConnection (connection.h), after parsing.
void AddConnectionFlags(CLI::App& app, ConnectionOptions& options);

// Parses argv into `app`. nullopt when the command should run; otherwise the exit status:
// 0 after printing the help that --help asked for (stdout), kUsageError after printing the
// reason on stderr (nothing on stdout).
std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv);

// Prints `reason` (one line) on stderr as ParseCommandLine prints a usage error, for checks
// made after parsing; returns kUsageError.
int UsageError(const CLI::App& app, const std::string& reason);

}  // namespace gatescope::client
