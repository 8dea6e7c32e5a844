#include "server/postprocess/classification.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

namespace gatescope {
namespace {

google::protobuf::RepeatedPtrField<std::string> Labels() {
  google::protobuf::RepeatedPtrField<std::string> labels;
  for (const char* l : {"cat", "dog", "owl", "ant"}) *labels.Add() = l;
  return labels;
}

TEST(TopKClassesTest, SortedSoftmaxProbabilities) {
  const at::Tensor logits = at::tensor({1.f, 3.f, 2.f, 0.f});
  auto top = TopKClasses(logits, Labels(), 3);
  ASSERT_TRUE(top.ok()) << top.status();
  ASSERT_EQ(top->size(), 3u);
  EXPECT_EQ((*top)[0].label, "dog");
  EXPECT_EQ((*top)[1].label, "owl");
  EXPECT_EQ((*top)[2].index, 0);
  const double z = std::exp(1.) + std::exp(3.) + std::exp(2.) + std::exp(0.);
  EXPECT_NEAR((*top)[0].probability, std::exp(3.) / z, 1e-6);
  EXPECT_NEAR((*top)[2].probability, std::exp(1.) / z, 1e-6);
}

TEST(TopKClassesTest, KIsClamped) {
  auto top = TopKClasses(at::tensor({0.f, 0.f, 0.f, 0.f}), Labels(), 10);
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(top->size(), 4u);
  EXPECT_NEAR((*top)[3].probability, 0.25, 1e-6);
}

TEST(TopKClassesTest, LabelCountMismatchIsInternal) {
  EXPECT_EQ(TopKClasses(at::tensor({1.f, 2.f}), Labels(), 1).status().code(),
            absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace gatescope
