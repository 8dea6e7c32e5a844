#include "server/postprocess/classification.h"

#include <ATen/core/Tensor.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/tensor.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

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

TEST(TopKClassesTest, AgreesWithTorchTopK) {
  google::protobuf::RepeatedPtrField<std::string> labels;
  for (int i = 0; i < 100; ++i) *labels.Add() = "class " + std::to_string(i);
  at::manual_seed(3);
  const at::Tensor logits = at::randn({100}) * 4;
  const at::Tensor probs = at::softmax(logits, 0);
  const auto [values, indices] = probs.topk(10);
  auto top = TopKClasses(logits, labels, 10);
  ASSERT_TRUE(top.ok()) << top.status();
  ASSERT_EQ(top->size(), 10u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ((*top)[i].index, indices[i].item<int64_t>()) << i;
    EXPECT_EQ((*top)[i].label, labels.Get((*top)[i].index));
    EXPECT_EQ((*top)[i].probability, values[i].item<float>()) << i;  // the same float
  }
}

TEST(TopKClassesTest, TiesByIndexAndNanFirst) {
  auto tied = TopKClasses(at::tensor({1.f, 2.f, 2.f, 1.f}), Labels(), 4);
  ASSERT_TRUE(tied.ok());
  std::vector<int> order;
  for (const auto& c : *tied) order.push_back(c.index);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 0, 3}));
  // A NaN logit makes every probability NaN: all tie, in index order.
  auto nan = TopKClasses(at::tensor({1.f, NAN, 2.f, 0.f}), Labels(), 2);
  ASSERT_TRUE(nan.ok());
  EXPECT_EQ((*nan)[0].index, 0);
  EXPECT_TRUE(std::isnan((*nan)[0].probability));
  // Half precision logits are ranked as float32.
  auto half = TopKClasses(at::tensor({1.f, 3.f, 2.f, 0.f}).to(at::kHalf), Labels(), 1);
  ASSERT_TRUE(half.ok());
  EXPECT_EQ((*half)[0].label, "dog");
}

TEST(TopKClassesTest, LabelCountMismatchIsInternal) {
  EXPECT_EQ(TopKClasses(at::tensor({1.f, 2.f}), Labels(), 1).status().code(),
            absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace gatescope
