#include "client/cli_checks.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace gatescope::client
