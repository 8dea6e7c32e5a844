#include "server/frontend/grpc/status_mapping.h"

#include <gtest/gtest.h>

namespace gatescope {
namespace {

TEST(StatusMappingTest, CodesAndMessagesCarryOver) {
  const struct {
    absl::Status in;
    grpc::StatusCode out;
    const char* name;
  } cases[] = {
      {absl::InvalidArgumentError("bad"), grpc::INVALID_ARGUMENT, "INVALID_ARGUMENT"},
      {absl::NotFoundError("x"), grpc::NOT_FOUND, "NOT_FOUND"},
      {absl::ResourceExhaustedError("q"), grpc::RESOURCE_EXHAUSTED, "RESOURCE_EXHAUSTED"},
      {absl::DeadlineExceededError("d"), grpc::DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED"},
      {absl::UnavailableError("u"), grpc::UNAVAILABLE, "UNAVAILABLE"},
      {absl::InternalError("i"), grpc::INTERNAL, "INTERNAL"},
  };
  for (const auto& c : cases) {
    const grpc::Status g = ToGrpcStatus(c.in);
    EXPECT_EQ(g.error_code(), c.out);
    EXPECT_EQ(g.error_message(), std::string(c.in.message()));
    EXPECT_EQ(StatusCodeName(c.in.code()), c.name);
  }
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_EQ(StatusCodeName(absl::StatusCode::kOk), "OK");
}

}  // namespace
}  // namespace gatescope
