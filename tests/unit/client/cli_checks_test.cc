#include "client/cli_checks.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

namespace gatescope::client {
namespace {

// The validator's verdict on `text`: empty when accepted, else the reason.
std::string Check(const CLI::Validator& v, std::string text) { return v(text); }

TEST(ClientCliChecksTest, IntegerInAcceptsOnlyWholeNumbersInRange) {
  const CLI::Validator v = IntegerIn(1, 1000);
  for (const char* ok : {"1", "1000", "42"}) EXPECT_EQ(Check(v, ok), "") << ok;
  for (const char* bad : {"0", "1001", "abc", "3x", "2.5", "", "99999999999999999999999"}) {
    EXPECT_NE(Check(v, bad), "") << bad;
  }
  EXPECT_NE(Check(v, "abc").find("[1, 1000]"), std::string::npos);
  EXPECT_EQ(v.get_description(), "[1, 1000]");
}

TEST(ClientCliChecksTest, NumberInHonoursAnOpenUpperBound) {
  const CLI::Validator open = NumberIn(0, 1, /*hi_open=*/true);
  for (const char* ok : {"0", "0.999", "1e-3"}) EXPECT_EQ(Check(open, ok), "") << ok;
  for (const char* bad : {"1", "1.5", "-0.1", "abc", "nan", "inf"}) {
    EXPECT_NE(Check(open, bad), "") << bad;
  }
  EXPECT_EQ(open.get_description(), "[0, 1)");
  EXPECT_EQ(Check(NumberIn(0, 1), "1"), "");
}

// Parses `args` (after the program name) into an app with a list flag, an int flag and
// positional files; returns ParseCommandLine's verdict.
struct Parsed {
  std::optional<int> exit;
  std::vector<int> layers;
  int top_k = 5;
  std::vector<std::string> files;
};

Parsed Parse(std::vector<std::string> args) {
  Parsed p;
  CLI::App app{"test", "test"};
  AddList(app, "--layers", p.layers, "layers")->check(IntegerIn(0, 10));
  app.add_option("--top-k", p.top_k, "k")->check(IntegerIn(1, 10));
  app.add_option("FILE", p.files, "inputs");
  args.insert(args.begin(), "test");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  p.exit = ParseCommandLine(app, static_cast<int>(argv.size()), argv.data());
  return p;
}

TEST(ClientCliChecksTest, ListFlagsTakeOneCommaSeparatedArgument) {
  const Parsed p = Parse({"--layers", "0,2", "a.png", "b.png"});
  EXPECT_FALSE(p.exit.has_value());
  EXPECT_EQ(p.layers, (std::vector<int>{0, 2}));
  EXPECT_EQ(p.files, (std::vector<std::string>{"a.png", "b.png"}));
  EXPECT_EQ(Parse({"--layers", "1", "--layers", "3", "a"}).layers, (std::vector<int>{1, 3}));
}

TEST(ClientCliChecksTest, UsageErrorsExitTwo) {
  const std::vector<std::vector<std::string>> bad = {
      {"--layers", "last", "a"}, {"--layers", "0,11", "a"}, {"--top-k", "0", "a"},
      {"--top-k", "abc", "a"},   {"--topk", "3", "a"},      {"--top-k"}};
  for (const auto& args : bad) EXPECT_EQ(Parse(args).exit, kUsageError) << args[0];
}

TEST(ClientCliChecksTest, HelpExitsZero) { EXPECT_EQ(Parse({"--help"}).exit, 0); }

// Parses `args` into an app with only the connection flags.
std::optional<int> ParseConnection(std::vector<std::string> args, ConnectionOptions& options) {
  CLI::App app{"test", "test"};
  AddConnectionFlags(app, options);
  args.insert(args.begin(), "test");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return ParseCommandLine(app, static_cast<int>(argv.size()), argv.data());
}

TEST(ClientCliChecksTest, ConnectionFlagsFillTheOptions) {
  unsetenv(kTokenFileEnv);
  ConnectionOptions o;
  EXPECT_FALSE(ParseConnection({"--server", "h:1", "--tls-ca", "ca.pem", "--tls-cert", "c.pem",
                                "--tls-key", "k.pem", "--tls-server-name", "name",
                                "--token-file", "tok"},
                               o)
                   .has_value());
  EXPECT_EQ(o.server, "h:1");
  EXPECT_EQ(o.tls_ca, "ca.pem");
  EXPECT_EQ(o.tls_cert, "c.pem");
  EXPECT_EQ(o.tls_key, "k.pem");
  EXPECT_EQ(o.tls_server_name, "name");
  EXPECT_EQ(o.token_file, "tok");

  ConnectionOptions defaults;
  EXPECT_FALSE(ParseConnection({}, defaults).has_value());
  EXPECT_EQ(defaults.server, kDefaultServer);
  EXPECT_EQ(defaults.tls_ca, "");
  EXPECT_EQ(defaults.token_file, "");
}

TEST(ClientCliChecksTest, TheTokenFileDefaultsToTheEnvironment) {
  setenv(kTokenFileEnv, "/run/secrets/token", 1);
  ConnectionOptions from_env, from_flag;
  EXPECT_FALSE(ParseConnection({}, from_env).has_value());
  EXPECT_FALSE(ParseConnection({"--token-file", "mine"}, from_flag).has_value());
  unsetenv(kTokenFileEnv);
  EXPECT_EQ(from_env.token_file, "/run/secrets/token");
  EXPECT_EQ(from_flag.token_file, "mine");
}

TEST(ClientCliChecksTest, UsageErrorPrintsTheReasonAndReturnsTwo) {
  CLI::App app{"test", "tool"};
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(UsageError(app, "--tls-cert needs --tls-key"), kUsageError);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "tool: --tls-cert needs --tls-key\nRun with --help for more information.\n");
}

}  // namespace
}  // namespace gatescope::client
