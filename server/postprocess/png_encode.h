// The server's pictures (segmentation masks, heatmap overlays) as PNG bytes, written by
// libpng itself rather than cv::imencode. The contract this buys: the server needs no
// OpenCV image-file module (which drags in GDAL and a dozen other codecs), so a GPU build
// carries only OpenCV core and imgproc, and PNG is written by the same library that
// decodes requests (server/preprocess/image_codec.h). Pure, thread-safe; libpng's errors
// and warnings become the returned status, never lines on stderr.
#pragma once

#include <string>

#include <opencv2/core/mat.hpp>

#include "absl/status/statusor.h"

namespace gatescope {

// `image` as an 8-bit PNG: CV_8UC1 gray, CV_8UC3 in OpenCV's BGR order, CV_8UC4 BGRA
// (channel order as cv::imencode takes it, so the file shows what OpenCV would). Any row
// step is taken (an ROI of a larger image needs no copy). Pixel values are stored
// unchanged and no colour-space chunk is added, so a class mask decodes back to its class
// indices; compression is cv::imencode's default (fast, moderate). INVALID_ARGUMENT for an
// empty image, another type, or a side over libpng's 1,000,000; INTERNAL with libpng's
// message if writing fails.
absl::StatusOr<std::string> EncodePng(const cv::Mat& image);

}  // namespace gatescope
