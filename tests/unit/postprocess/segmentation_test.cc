#include "server/postprocess/segmentation.h"

#include <ATen/core/Tensor.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/bincount.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/upsample_bilinear2d.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include <numeric>
#include <opencv2/imgcodecs.hpp>
#include <vector>

namespace gatescope {
namespace {

// Three classes on a 2x3 grid: class k wins where logits[k] is largest.
at::Tensor HandLogits() {
  return at::tensor({// class 0
                     5.f, 0.f, 0.f, 0.f, 1.f, 0.f,
                     // class 1
                     0.f, 5.f, 0.f, 0.f, 2.f, 0.f,
                     // class 2
                     0.f, 0.f, 5.f, 5.f, 0.f, 1.f})
      .reshape({3, 2, 3});
}

TEST(SegmentLogitsTest, ArgmaxAtModelSize) {
  auto seg = SegmentLogits(HandLogits(), 2, 3, {});
  ASSERT_TRUE(seg.ok()) << seg.status();
  ASSERT_EQ(seg->mask.scalar_type(), at::kByte);
  ASSERT_EQ(seg->mask.sizes(), (std::vector<int64_t>{2, 3}));
  const std::vector<uint8_t> want = {0, 1, 2, 2, 1, 2};
  const uint8_t* m = seg->mask.data_ptr<uint8_t>();
  EXPECT_EQ(std::vector<uint8_t>(m, m + 6), want);
  EXPECT_EQ(seg->class_pixels, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_FALSE(seg->probabilities.defined());
  EXPECT_TRUE(seg->png.empty());
}

TEST(SegmentLogitsTest, TiesGoToTheLowestClass) {
  auto seg = SegmentLogits(at::zeros({4, 2, 2}), 2, 2, {});
  ASSERT_TRUE(seg.ok()) << seg.status();
  EXPECT_EQ(seg->mask.sum().item<int64_t>(), 0);
  EXPECT_EQ(seg->class_pixels, (std::vector<int64_t>{4, 0, 0, 0}));
}

// The mask and counts are ATen's argmax over classes (first maximum; a NaN counts as the
// largest, the first NaN winning) and bincount, on logits full of ties and some NaNs, at
// model size and resized, for 1, 2, 5 and 256 classes.
TEST(SegmentLogitsTest, MaskAndCountsAreArgmaxAndBincount) {
  at::manual_seed(3);
  for (int64_t classes : {1, 2, 5, 256}) {
    at::Tensor logits = at::randint(0, 4, {classes, 17, 23}).to(at::kFloat);  // many ties
    logits.masked_fill_(at::rand({classes, 17, 23}) < 0.02, NAN);
    for (auto [h, w] : {std::pair<int64_t, int64_t>{17, 23}, {40, 31}}) {
      SCOPED_TRACE(testing::Message() << classes << " classes at " << h << "x" << w);
      auto seg = SegmentLogits(logits, h, w, {});
      ASSERT_TRUE(seg.ok()) << seg.status();
      at::Tensor scores = logits;
      if (h != 17 || w != 23) {
        scores = at::upsample_bilinear2d(logits.unsqueeze(0), {h, w}, false, c10::nullopt,
                                         c10::nullopt)
                     .squeeze(0);
      }
      const at::Tensor want = scores.argmax(0);
      EXPECT_TRUE(at::equal(seg->mask, want.to(at::kByte)));
      const at::Tensor counts = at::bincount(want.reshape({-1}), {}, classes);
      EXPECT_EQ(seg->class_pixels,
                std::vector<int64_t>(counts.data_ptr<int64_t>(),
                                     counts.data_ptr<int64_t>() + classes));
    }
  }
}

TEST(SegmentLogitsTest, ResizesLogitsBilinearlyToTheInputSize) {
  at::manual_seed(7);
  const at::Tensor logits = at::randn({5, 8, 6});
  SegmentationOptions options;
  options.probabilities = true;
  auto seg = SegmentLogits(logits, 19, 13, options);
  ASSERT_TRUE(seg.ok()) << seg.status();
  const at::Tensor resized =
      at::upsample_bilinear2d(logits.unsqueeze(0), {19, 13}, false).squeeze(0);
  EXPECT_TRUE(at::equal(seg->mask, resized.argmax(0).to(at::kByte)));
  EXPECT_EQ(std::accumulate(seg->class_pixels.begin(), seg->class_pixels.end(), int64_t{0}),
            19 * 13);
  for (int64_t c = 0; c < 5; ++c) {
    EXPECT_EQ(seg->class_pixels[c], seg->mask.eq(c).sum().item<int64_t>());
  }
  ASSERT_EQ(seg->probabilities.sizes(), (std::vector<int64_t>{5, 19, 13}));
  EXPECT_TRUE(at::allclose(seg->probabilities.sum(0), at::ones({19, 13}), 1e-5, 1e-5));
  EXPECT_TRUE(at::equal(seg->probabilities.argmax(0).to(at::kByte), seg->mask));
}

TEST(SegmentLogitsTest, PngDecodesBackToTheMask) {
  SegmentationOptions options;
  options.png = true;
  at::manual_seed(8);
  auto seg = SegmentLogits(at::randn({7, 11, 9}), 23, 17, options);
  ASSERT_TRUE(seg.ok()) << seg.status();
  ASSERT_FALSE(seg->png.empty());
  const std::vector<uchar> bytes(seg->png.begin(), seg->png.end());
  const cv::Mat decoded = cv::imdecode(bytes, cv::IMREAD_UNCHANGED);
  ASSERT_EQ(decoded.type(), CV_8UC1);
  ASSERT_EQ(decoded.rows, 23);
  ASSERT_EQ(decoded.cols, 17);
  const at::Tensor back = at::from_blob(decoded.data, {23, 17}, at::kByte);
  EXPECT_TRUE(at::equal(back, seg->mask));
}

TEST(SegmentLogitsTest, RejectsMalformedLogits) {
  EXPECT_EQ(SegmentLogits(at::zeros({3, 4}), 3, 4, {}).status().code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(SegmentLogits(at::zeros({257, 2, 2}), 2, 2, {}).status().code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(SegmentLogits(at::zeros({2, 2, 2}), 0, 2, {}).status().code(),
            absl::StatusCode::kInternal);
  SegmentationOptions five;
  five.classes = 5;  // the model's labels
  EXPECT_EQ(SegmentLogits(at::zeros({4, 2, 2}), 2, 2, five).status().code(),
            absl::StatusCode::kInternal);
  EXPECT_TRUE(SegmentLogits(at::zeros({5, 2, 2}), 2, 2, five).ok());
}

TEST(SegmentLogitsTest, RefusesOutputsOverTheByteCapBeforeAllocating) {
  SegmentationOptions options;
  options.max_bytes = 10'000;
  // 3 classes at 20 x 30: 600 * (12 + 9) = 12,600 bytes > 10,000.
  const auto big = SegmentLogits(at::zeros({3, 2, 2}), 20, 30, options);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(SegmentLogits(at::zeros({3, 2, 2}), 10, 30, options).ok());  // 6,300 bytes
  options.probabilities = true;  // 300 * (36 + 9) = 13,500 bytes
  EXPECT_EQ(SegmentLogits(at::zeros({3, 2, 2}), 10, 30, options).status().code(),
            absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace gatescope
