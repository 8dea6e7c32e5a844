#include "server/auth/access_control.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace gatescope {
namespace {

constexpr char kUser[] = "user-token-0123456789";
constexpr char kOther[] = "other-user-token-abcdef";
constexpr char kAdmin[] = "admin-token-0123456789";

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

std::unique_ptr<AccessControl> Make(std::set<Access> exempt = {Access::kHealth}) {
  AccessOptions o;
  o.tokens_file = WriteFile("tokens", std::string("# users\n\n  ") + kUser + "  \n" + kOther + "\n");
  o.admin_tokens_file = WriteFile("admin", std::string(kAdmin) + "\n");
  o.exempt = std::move(exempt);
  auto access = AccessControl::Load(o);
  EXPECT_TRUE(access.ok()) << access.status();
  return *std::move(access);
}

std::string Bearer(const char* token) { return std::string("Bearer ") + token; }

TEST(AccessControl, OffWithoutTokenFiles) {
  auto access = AccessControl::Load(AccessOptions{});
  ASSERT_TRUE(access.ok());
  EXPECT_FALSE((*access)->enabled());
  EXPECT_TRUE((*access)->Check("", Access::kModelControl).ok());
}

TEST(AccessControl, TokensGrantTheirCategories) {
  auto access = Make();
  ASSERT_TRUE(access->enabled());
  for (Access a : {Access::kMetadata, Access::kInference, Access::kMetrics}) {
    EXPECT_TRUE(access->Check(Bearer(kUser), a).ok());
    EXPECT_TRUE(access->Check(Bearer(kOther), a).ok());
    EXPECT_TRUE(access->Check(Bearer(kAdmin), a).ok());
    EXPECT_EQ(access->Check("", a).code(), absl::StatusCode::kUnauthenticated);
    EXPECT_EQ(access->Check(Bearer("user-token-0123456788"), a).code(),
              absl::StatusCode::kUnauthenticated);
    EXPECT_EQ(access->Check(std::string("Basic ") + kUser, a).code(),
              absl::StatusCode::kUnauthenticated);
  }
  EXPECT_TRUE(access->Check(std::string("bearer  ") + kUser, Access::kInference).ok());
  EXPECT_TRUE(access->Check("", Access::kHealth).ok());  // exempt
  EXPECT_TRUE(access->Check(Bearer(kAdmin), Access::kModelControl).ok());
  EXPECT_EQ(access->Check(Bearer(kUser), Access::kModelControl).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(access->Check("", Access::kModelControl).code(), absl::StatusCode::kUnauthenticated);
}

TEST(AccessControl, ExemptCategoriesAreOpen) {
  auto access = Make({Access::kMetrics, Access::kMetadata});
  EXPECT_TRUE(access->Check("", Access::kMetrics).ok());
  EXPECT_TRUE(access->Check("", Access::kMetadata).ok());
  EXPECT_EQ(access->Check("", Access::kHealth).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(access->Check("", Access::kInference).code(), absl::StatusCode::kUnauthenticated);
  AccessOptions o;
  o.admin_tokens_file = WriteFile("admin2", std::string(kAdmin) + "\n");
  o.exempt = {Access::kModelControl};
  EXPECT_EQ(AccessControl::Load(o).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExemptAccessNamed("metrics").value(), Access::kMetrics);
  EXPECT_FALSE(ExemptAccessNamed("model_control").ok());
}

TEST(AccessControl, BadTokenFilesAreRefused) {
  for (const std::string& text : {std::string("short\n"), std::string("# only a comment\n"),
                                  std::string("has a space in it 0123456789\n")}) {
    AccessOptions o;
    o.tokens_file = WriteFile("bad", text);
    const auto access = AccessControl::Load(o);
    EXPECT_EQ(access.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
  AccessOptions missing;
  missing.tokens_file = ::testing::TempDir() + "/no-such-file";
  EXPECT_EQ(AccessControl::Load(missing).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gatescope
