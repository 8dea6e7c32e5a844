#include "client/ground_truth.h"

#include <algorithm>
#include <sstream>

#include "client/file_io.h"

namespace gatescope::client {
namespace {

double Iou(const DrawnBox& a, const DrawnBox& b) {
  const double w = std::max(0.f, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
  const double h = std::max(0.f, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
  const double inter = w * h;
  const double area_a = std::max(0.f, a.x2 - a.x1) * std::max(0.f, a.y2 - a.y1);
  const double area_b = std::max(0.f, b.x2 - b.x1) * std::max(0.f, b.y2 - b.y1);
  return inter > 0 ? inter / (area_a + area_b - inter) : 0.0;
}

}  // namespace

absl::StatusOr<cv::Mat> ReadLabelImage(const std::string& path) {
  std::string bytes;
  if (!ReadFile(path, bytes)) return absl::NotFoundError("cannot read --gt " + path);
  cv::Mat labels;
  if (!bytes.empty()) {
    try {
      const cv::Mat raw(1, static_cast<int>(bytes.size()), CV_8UC1, bytes.data());
      labels = cv::imdecode(raw, cv::IMREAD_UNCHANGED);
    } catch (const cv::Exception&) {
      labels = cv::Mat();
    }
  }
  if (labels.empty() || labels.type() != CV_8UC1) {
    return absl::InvalidArgumentError("--gt " + path +
                                      " is not an 8-bit single-channel PNG of class indices");
  }
  return labels;
}

absl::StatusOr<std::vector<DrawnBox>> ReadBoxesCsv(const std::string& path) {
  std::string text;
  if (!ReadFile(path, text)) return absl::NotFoundError("cannot read --gt " + path);
  std::vector<DrawnBox> boxes;
  std::istringstream lines(text);
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos || line[0] == '#') continue;
    std::replace(line.begin(), line.end(), ',', ' ');
    std::istringstream fields(line);
    DrawnBox b;
    b.label = -1;
    if (!(fields >> b.x1 >> b.y1 >> b.x2 >> b.y2) || b.x2 <= b.x1 || b.y2 <= b.y1) {
      return absl::InvalidArgumentError("--gt " + path + " line " + std::to_string(number) +
                                        ": want x1,y1,x2,y2[,label] with x2 > x1, y2 > y1");
    }
    if (!(fields >> b.label)) b.label = -1;
    boxes.push_back(b);
  }
  return boxes;
}

std::map<int, double> DiceByClass(const cv::Mat& predicted, const cv::Mat& truth) {
  std::map<int, double> dice;
  if (predicted.size() != truth.size() || predicted.type() != CV_8UC1 ||
      truth.type() != CV_8UC1) {
    return dice;
  }
  std::map<int, int64_t> p, g, both;
  for (int y = 0; y < truth.rows; ++y) {
    const uchar* pr = predicted.ptr<uchar>(y);
    const uchar* gr = truth.ptr<uchar>(y);
    for (int x = 0; x < truth.cols; ++x) {
      ++p[pr[x]];
      ++g[gr[x]];
      if (pr[x] == gr[x]) ++both[pr[x]];
    }
  }
  std::map<int, int64_t> classes = p;
  classes.insert(g.begin(), g.end());
  for (const auto& [c, unused] : classes) {
    if (c == 0) continue;
    dice[c] = 2.0 * both[c] / static_cast<double>(p[c] + g[c]);
  }
  return dice;
}

double MeanDice(const std::map<int, double>& dice) {
  if (dice.empty()) return 1.0;
  double sum = 0;
  for (const auto& [c, d] : dice) sum += d;
  return sum / dice.size();
}

int MatchedBoxes(const std::vector<DrawnBox>& predicted, const std::vector<DrawnBox>& truth,
                 double iou) {
  std::vector<bool> used(predicted.size(), false);
  int matched = 0;
  for (const DrawnBox& t : truth) {
    for (size_t i = 0; i < predicted.size(); ++i) {
      if (!used[i] && Iou(predicted[i], t) >= iou) {
        used[i] = true;
        ++matched;
        break;
      }
    }
  }
  return matched;
}

}  // namespace gatescope::client
