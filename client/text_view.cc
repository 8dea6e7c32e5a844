#include "client/text_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

namespace gatescope::client {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD
constexpr char kWordMark[] = "\xE2\x96\x81";     // U+2581, SentencePiece's word start

constexpr int kFont = cv::FONT_HERSHEY_SIMPLEX;
constexpr double kFontScale = 0.35;
const cv::Scalar kWhite(255, 255, 255);

// The length of the valid UTF-8 sequence at the start of `s`, or 0 if there is none.
size_t SequenceLength(std::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = byte(0);
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // no overlong forms
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  if (s.size() < n || byte(1) < lo || byte(1) > hi) return 0;
  for (size_t i = 2; i < n; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return n;
}

// One code point (its UTF-8 bytes) as HTML text: escaped; control characters other than
// tab and line ends as their control pictures (U+2400 + c, U+2421 for DEL).
std::string HtmlCharacter(const std::string& c) {
  if (c.size() == 1) {
    const unsigned char b = static_cast<unsigned char>(c[0]);
    if (b == '\t' || b == '\n' || b == '\r') return c;
    if (b < 0x20 || b == 0x7F) {
      const int picture = b == 0x7F ? 0x2421 : 0x2400 + b;
      return "&#x" + [&] {
        char hex[8];
        std::snprintf(hex, sizeof(hex), "%X", picture);
        return std::string(hex);
      }() + ";";
    }
  }
  return HtmlEscape(c);
}

std::string HtmlCharacters(const std::vector<std::string>& chars, int32_t from, int32_t to) {
  std::string out;
  for (int32_t i = from; i < to; ++i) out += HtmlCharacter(chars[i]);
  return out;
}

std::string Number(double v, const char* format) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), format, v);
  return buffer;
}

int TextWidth(const std::string& text) {
  int baseline = 0;
  return cv::getTextSize(text, kFont, kFontScale, 1, &baseline).width;
}

void PutText(cv::Mat& image, const std::string& text, int x, int y) {
  cv::putText(image, text, cv::Point(x, y), kFont, kFontScale, kWhite, 1, cv::LINE_AA);
}

// The position of `value` along `scale`'s bar, 0..100 %, as ColourBar places its ticks.
double PercentOf(float value, const ColourScale& scale) {
  const double t = (static_cast<double>(value) - scale.low()) / (scale.limit - scale.low());
  return std::clamp(static_cast<int>(std::lround(t * 255.0)), 0, 255) * 100.0 / 255.0;
}

std::string Base64(const std::vector<uchar>& bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t n = (static_cast<uint32_t>(bytes[i]) << 16) |
                       (i + 1 < bytes.size() ? static_cast<uint32_t>(bytes[i + 1]) << 8 : 0) |
                       (i + 2 < bytes.size() ? static_cast<uint32_t>(bytes[i + 2]) : 0);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[n & 63] : '=';
  }
  return out;
}

constexpr char kCss[] =
    "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;background:#fafafa;"
    "color:#222;margin:1.5em auto;max-width:72em;padding:0 1em}"
    "h1{font-size:1.4em;margin-bottom:.3em}h2{font-size:1.15em;margin:1.6em 0 .4em}"
    "table.meta th,table.meta td{padding:.1em 1.2em .1em 0;text-align:left;vertical-align:top}"
    "table.meta th{color:#666;font-weight:normal}"
    "p.what{color:#555;font-size:.9em;margin:.2em 0 .6em}"
    ".note{background:#fff4d6;border-left:4px solid #e0a800;padding:.4em .8em}"
    ".error{color:#b00020}"
    ".text{white-space:pre-wrap;overflow-wrap:anywhere;line-height:2.1;font-size:1.1em;"
    "background:#fff;border:1px solid #ddd;border-radius:4px;padding:.5em .8em;margin:0}"
    ".text .p{border-radius:2px}"
    ".text .unread{color:#999;text-decoration:line-through dotted}"
    ".bar{display:flex;align-items:flex-start;gap:1em;margin:.5em 0;font-size:.9em}"
    ".scale{position:relative;width:20em;flex:none}"
    ".ramp{height:.9em;border:1px solid #888}"
    ".scale i{position:absolute;top:-3px;width:1px;height:calc(.9em + 8px);background:#fff;"
    "box-shadow:0 0 0 1px #000}"
    ".ends{display:flex;justify-content:space-between;font-size:.8em;color:#555}"
    "figure{margin:1em 0;overflow-x:auto}figure img{display:block;image-rendering:pixelated}"
    "figcaption{font-size:.85em;color:#555;margin-top:.2em}"
    "table.rows{border-collapse:collapse;width:100%}"
    "table.rows th{text-align:left;vertical-align:top;padding:.6em 1em .6em 0;width:14em;"
    "font-weight:normal}"
    "table.rows td{padding:.6em 0;vertical-align:top}"
    "table.rows tr+tr{border-top:1px solid #ddd}"
    "table.rows .model{font-weight:bold}table.rows small{color:#666}"
    "code{background:#eee;padding:0 .2em;border-radius:2px}";

}  // namespace

std::vector<std::string> CodePoints(std::string_view text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size();) {
    const size_t n = SequenceLength(text.substr(i));
    if (n == 0) {
      out.emplace_back(kReplacement);
      ++i;
    } else {
      out.emplace_back(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<ShadedRun> ShadedRuns(const std::vector<ShadedPiece>& pieces) {
  std::vector<ShadedRun> runs;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const ShadedPiece& p = pieces[i];
    if (p.begin < 0 || p.begin >= p.end) continue;
    if (!runs.empty() && p.begin < runs.back().end) {
      ShadedRun& run = runs.back();
      run.begin = std::min(run.begin, p.begin);
      run.end = std::max(run.end, p.end);
      run.value += p.value;
      run.pieces.push_back(i);
    } else {
      runs.push_back({p.begin, p.end, p.value, {i}});
    }
  }
  return runs;
}

MapRange RangeOfRuns(const std::vector<ShadedRun>& runs) {
  if (runs.empty()) return {};
  cv::Mat values(1, static_cast<int>(runs.size()), CV_32FC1);
  for (size_t i = 0; i < runs.size(); ++i) values.at<float>(0, static_cast<int>(i)) = runs[i].value;
  return RangeOf(values);
}

cv::Vec3b ScaleColour(float value, const ColourScale& scale) {
  const cv::Mat one(1, 1, CV_32FC1, cv::Scalar(value));
  return Colourize(one, scale).at<cv::Vec3b>(0, 0);
}

std::string CssColour(const cv::Vec3b& bgr) {
  char css[8];
  std::snprintf(css, sizeof(css), "#%02x%02x%02x", bgr[2], bgr[1], bgr[0]);
  return css;
}

std::string ContrastColour(const cv::Vec3b& background) {
  const auto linear = [](uchar c) {
    const double s = c / 255.0;
    return s <= 0.04045 ? s / 12.92 : std::pow((s + 0.055) / 1.055, 2.4);
  };
  const double luminance = 0.2126 * linear(background[2]) + 0.7152 * linear(background[1]) +
                           0.0722 * linear(background[0]);
  const double against_white = 1.05 / (luminance + 0.05);
  const double against_black = (luminance + 0.05) / 0.05;
  return against_black >= against_white ? "#000" : "#fff";
}

std::string ShadedTextHtml(std::string_view text, const std::vector<ShadedPiece>& pieces,
                           const std::vector<ShadedRun>& runs, const ColourScale& scale,
                           const std::string& value_name, bool truncated) {
  const std::vector<std::string> chars = CodePoints(text);
  const int32_t n = static_cast<int32_t>(chars.size());
  std::string out = "<div class=\"text\">";
  int32_t cursor = 0;
  for (const ShadedRun& run : runs) {
    const int32_t begin = std::clamp(run.begin, cursor, n);
    const int32_t end = std::clamp(run.end, begin, n);
    out += HtmlCharacters(chars, cursor, begin);
    std::string title;
    for (size_t i : run.pieces) {
      const ShadedPiece& p = pieces[i];
      if (!title.empty()) title += "&#10;";
      title += HtmlEscape(p.piece) + " \xC2\xB7 id " + std::to_string(p.id) + " \xC2\xB7 " +
               HtmlEscape(value_name) + " " + Number(p.value, "%.4g");
    }
    if (run.pieces.size() > 1) {
      title += "&#10;shaded by their sum " + Number(run.value, "%.4g");
    }
    const cv::Vec3b colour = ScaleColour(run.value, scale);
    out += "<span class=\"p\" style=\"background:" + CssColour(colour) +
           ";color:" + ContrastColour(colour) + "\" title=\"" + title + "\" data-value=\"" +
           Number(run.value, "%.6g") + "\">" + HtmlCharacters(chars, begin, end) + "</span>";
    cursor = end;
  }
  if (cursor < n && truncated) {
    out += "<span class=\"unread\" title=\"not read: past the pieces the model takes\">" +
           HtmlCharacters(chars, cursor, n) + "</span>";
  } else {
    out += HtmlCharacters(chars, cursor, n);
  }
  return out + "</div>";
}

std::string ColourBarHtml(const ColourScale& scale, const MapRange& range,
                          const std::string& label) {
  const std::vector<cv::Vec3b> colours = ScaleColours(scale.diverging);
  std::string gradient;
  for (int i = 0; i <= 255; i += 15) {
    gradient += "," + CssColour(colours[i]) + " " + Number(i * 100.0 / 255.0, "%.2f") + "%";
  }
  std::string out = "<div class=\"bar\"><div class=\"scale\"><div class=\"ramp\" "
                    "style=\"background:linear-gradient(to right" + gradient + ")\"></div>";
  if (range.finite > 0) {
    for (float v : {range.min, range.max}) {
      out += "<i style=\"left:" + Number(PercentOf(v, scale), "%.2f") + "%\"></i>";
    }
  }
  out += "<div class=\"ends\"><span>" + HtmlEscape(ShortNumber(scale.low())) + "</span>";
  if (scale.diverging) out += "<span>0</span>";
  out += "<span>" + HtmlEscape(ShortNumber(scale.limit)) + "</span></div></div><span>" +
         HtmlEscape(label) + ": " + HtmlEscape(RangeText(range)) + " <small>(" +
         (scale.diverging ? "signed: blue - grey - red about 0" : "viridis from 0") +
         ")</small></span></div>";
  return out;
}

std::string PngDataUri(const cv::Mat& image) {
  std::vector<uchar> png;
  // The smallest PNG: the page carries it in base64.
  if (image.empty() || !cv::imencode(".png", image, png, {cv::IMWRITE_PNG_COMPRESSION, 9})) {
    return "";
  }
  return "data:image/png;base64," + Base64(png);
}

std::string AsciiLabel(std::string_view piece, size_t max) {
  std::string out;
  size_t count = 0;
  for (const std::string& c : CodePoints(piece)) {
    ++count;
    if (c == kWordMark) {
      out += '_';
    } else if (c.size() == 1 && c[0] >= 0x20 && c[0] < 0x7F) {
      out += c;
    } else {
      out += '?';
    }
  }
  if (max > 0 && count > max) out = out.substr(0, max - 1) + "~";
  return out;
}

cv::Mat TokenHeatmap(const cv::Mat& map, const std::vector<std::string>& pieces,
                     const ColourScale& scale, const std::string& title,
                     const std::string& row_prefix, const std::string& scale_note) {
  if (map.empty() || map.type() != CV_32FC1 ||
      static_cast<size_t>(map.cols) != pieces.size()) {
    return {};
  }
  constexpr int kCellWidth = 12, kCellHeight = 14, kTitleHeight = 18, kRangeHeight = 16;
  const int rows = map.rows, cols = map.cols;
  std::vector<std::string> labels;
  int label_width = 0, row_label_width = 0;
  for (const std::string& p : pieces) {
    labels.push_back(AsciiLabel(p));
    label_width = std::max(label_width, TextWidth(labels.back()));
  }
  for (int r = 0; r < rows; ++r) {
    row_label_width = std::max(row_label_width, TextWidth(row_prefix + std::to_string(r)));
  }
  const int left = row_label_width + 8;
  const int label_height = std::max(label_width + 6, 16);
  const int grid_width = cols * kCellWidth, grid_height = rows * kCellHeight;
  const int bar_width = std::max(160, std::min(grid_width, 480));
  const MapRange range = RangeOf(map);
  const std::string caption =
      RangeText(range) + (scale_note.empty() ? "" : "  (" + scale_note + ")");
  const int width = std::max({left + grid_width + 4, left + bar_width + 4, TextWidth(title) + 8,
                              left + TextWidth(caption) + 4});
  const int height = kTitleHeight + grid_height + label_height + kColourBarHeight + kRangeHeight;
  cv::Mat out(height, width, CV_8UC3, cv::Scalar(0, 0, 0));
  PutText(out, title, 4, kTitleHeight - 5);

  cv::Mat cells;
  cv::resize(Colourize(map, scale), cells, cv::Size(grid_width, grid_height), 0, 0,
             cv::INTER_NEAREST);
  cells.copyTo(out(cv::Rect(left, kTitleHeight, grid_width, grid_height)));
  for (int r = 0; r < rows; ++r) {
    const std::string text = row_prefix + std::to_string(r);
    PutText(out, text, left - 4 - TextWidth(text),
            kTitleHeight + r * kCellHeight + kCellHeight / 2 + 4);
  }
  // The pieces written right-aligned along the rows of a strip, then turned a quarter
  // counter-clockwise: each under its column, read bottom to top, ending at the cells.
  cv::Mat strip(grid_width, label_height, CV_8UC3, cv::Scalar(0, 0, 0)), turned;
  for (int c = 0; c < cols; ++c) {
    PutText(strip, labels[c], label_height - 3 - TextWidth(labels[c]),
            c * kCellWidth + kCellWidth / 2 + 4);
  }
  cv::rotate(strip, turned, cv::ROTATE_90_COUNTERCLOCKWISE);
  turned.copyTo(out(cv::Rect(left, kTitleHeight + grid_height, grid_width, label_height)));

  const int bar_y = kTitleHeight + grid_height + label_height;
  ColourBar(bar_width, scale, range)
      .copyTo(out(cv::Rect(left, bar_y, bar_width, kColourBarHeight)));
  PutText(out, caption, left, bar_y + kColourBarHeight + kRangeHeight - 5);
  return out;
}

std::string PageStart(const std::string& title) {
  return "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
         "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
         "img-src data:; style-src 'unsafe-inline'\">"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
         "<title>" + HtmlEscape(title) + "</title><style>" + kCss + "</style></head><body>\n";
}

std::string PageEnd() { return "</body></html>\n"; }

}  // namespace gatescope::client
