// Whole-file reads and writes of the command-line tools.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

namespace gatescope::client {

// False if `path` cannot be read.
inline bool ReadFile(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

// False if `path` cannot be written.
inline bool WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  return static_cast<bool>(out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())));
}

// `image` as a PNG at `path`; false if it is empty or cannot be encoded or written.
inline bool WritePng(const std::string& path, const cv::Mat& image) {
  std::vector<uchar> png;
  return !image.empty() && cv::imencode(".png", image, png) &&
         WriteBytes(path, std::string(png.begin(), png.end()));
}

}  // namespace gatescope::client
