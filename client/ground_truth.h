// Ground truth given to explain --compare (--gt): a label image for segmentation, boxes for
// detection, and the scores comparing a prediction with it. Pure OpenCV, no gRPC.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "absl/status/statusor.h"
#include "client/detection_view.h"

namespace gatescope::client {

// A PNG of class indices (8-bit, one channel; a colour PNG is refused, since its colours
// are not indices). NOT_FOUND / INVALID_ARGUMENT naming the file.
absl::StatusOr<cv::Mat> ReadLabelImage(const std::string& path);

// Boxes, one per line "x1,y1,x2,y2" or "x1,y1,x2,y2,label_index" in input pixels; blank
// lines and lines starting with '#' are skipped. INVALID_ARGUMENT naming the line.
absl::StatusOr<std::vector<DrawnBox>> ReadBoxesCsv(const std::string& path);

// Per-class Dice 2|P∩G| / (|P| + |G|) of two same-size CV_8UC1 label images over the
// classes present in either (class 0, the background, excluded); empty if sizes differ.
std::map<int, double> DiceByClass(const cv::Mat& predicted, const cv::Mat& truth);

// The mean of DiceByClass's values; 1 when neither image has a foreground class.
double MeanDice(const std::map<int, double>& dice);

// How many of `truth` boxes some box of `predicted` overlaps with IoU >= `iou`, each
// predicted box matching at most one truth box (greedy, in order).
int MatchedBoxes(const std::vector<DrawnBox>& predicted, const std::vector<DrawnBox>& truth,
                 double iou = 0.5);

}  // namespace gatescope::client
