// Text explanations as self-contained HTML: the original text with each piece a model read
// shaded by its value on the honest colour scales of server/explain/colour_scale.h (the
// rules of docs/pictures.md: viridis from 0 for non-negative values, blue - grey - red
// symmetric about 0 for signed ones), colour bars, and heatmaps of per-piece maps (gates,
// heads x pieces) as PNG pictures to inline as data: URIs.
// Pure (std + OpenCV, no gRPC); every function is thread-safe. OpenCV may throw
// cv::Exception on allocation failures.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <opencv2/core.hpp>

#include "server/explain/colour_scale.h"

namespace gatescope::client {

using ::gatescope::ColourScale;
using ::gatescope::MapRange;

// One piece of a text as a model's tokenizer cut it, with its value (e.g. its rollout).
struct ShadedPiece {
  std::string piece;  // as the tokenizer names it, e.g. "▁word"
  int32_t id = 0;
  // The code points [begin, end) of the text the piece came from; begin == end for a piece
  // the tokenizer inserted (such pieces are not shown).
  int32_t begin = 0;
  int32_t end = 0;
  float value = 0.f;
};

// A stretch of the text drawn as one shaded span: the pieces covering it (one, unless the
// tokenizer cut one character into several pieces) and their summed value.
struct ShadedRun {
  int32_t begin = 0;
  int32_t end = 0;
  float value = 0.f;
  std::vector<size_t> pieces;  // indices into the pieces
};

// The code points of UTF-8 `text`, each as its UTF-8 bytes; every byte that does not
// start a valid sequence is one code point of its own, U+FFFD.
std::vector<std::string> CodePoints(std::string_view text);

// `text` with & < > " ' as character references: safe in element content and in quoted
// attribute values.
std::string HtmlEscape(std::string_view text);

// The runs of `pieces` (in text order), skipping pieces with begin >= end; a piece that
// starts inside the previous run joins it.
std::vector<ShadedRun> ShadedRuns(const std::vector<ShadedPiece>& pieces);

// The range of the runs' values: what a page's colour scale has to cover.
MapRange RangeOfRuns(const std::vector<ShadedRun>& runs);

// The colour `value` has on `scale`, exactly as Colourize draws it (BGR).
cv::Vec3b ScaleColour(float value, const ColourScale& scale);

// "#rrggbb" of a BGR colour.
std::string CssColour(const cv::Vec3b& bgr);

// "#000" or "#fff": whichever has the higher WCAG contrast ratio against `background`.
std::string ContrastColour(const cv::Vec3b& background);

// A <div class="text"> holding `text` as it was written, every character kept (whitespace
// and the characters between pieces too), each run a <span> whose background is its value's
// colour on `scale` (text black or white for contrast) with a hover title naming each of
// its pieces, its id and its `value_name` value. With `truncated`, the characters after the
// last run are marked as not read. Control characters other than tab and newlines are
// shown as their Unicode control pictures. Runs must come from ShadedRuns(pieces) over
// code points of `text`.
std::string ShadedTextHtml(std::string_view text, const std::vector<ShadedPiece>& pieces,
                           const std::vector<ShadedRun>& runs, const ColourScale& scale,
                           const std::string& value_name, bool truncated = false);

// A <div class="bar">: `scale` as a horizontal gradient of the scale's own colours, its end
// values (and 0 when diverging) under it, white ticks where `range` lies, then `label` and
// the range (RangeText) beside it.
std::string ColourBarHtml(const ColourScale& scale, const MapRange& range,
                          const std::string& label);

// "data:image/png;base64,..." of `image` (8-bit BGR); "" if it cannot be encoded.
std::string PngDataUri(const cv::Mat& image);

// `piece` in the ASCII that the pictures' font has: the SentencePiece word mark "▁" as
// "_", any other non-ASCII code point as "?", cut to `max` characters (the last one "~").
std::string AsciiLabel(std::string_view piece, size_t max = 12);

// A heatmap of `map` (CV_32FC1, rows x pieces; e.g. a layer's gate, heads x pieces) on
// `scale`: `title` above, a cell per value, "<row_prefix><r>" along y, `pieces` (AsciiLabel,
// rotated) along x, then the colour bar (ColourBar, with the map's own range ticked) and the
// map's range with `scale_note`. Empty if `map` is empty or `pieces` does not match it.
cv::Mat TokenHeatmap(const cv::Mat& map, const std::vector<std::string>& pieces,
                     const ColourScale& scale, const std::string& title,
                     const std::string& row_prefix, const std::string& scale_note);

// The start of a self-contained page titled `title`: its <head> (UTF-8, a content security
// policy that loads nothing from elsewhere, the pages' CSS) and <body>; PageEnd closes it.
std::string PageStart(const std::string& title);
std::string PageEnd();

}  // namespace gatescope::client
