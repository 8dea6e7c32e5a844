#include "client/text_output.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <opencv2/core.hpp>

#include "client/classification_output.h"
#include "client/file_io.h"
#include "client/json_writer.h"
#include "client/map_tensors.h"
#include "client/npy_writer.h"
#include "client/panel.h"

namespace gatescope::client {
namespace {

using ::gatescope::v1::ExplainRequest;
using ::gatescope::v1::ExplainResponse;
using ::gatescope::v1::Tensor;
using ::gatescope::v1::TextInput;
using ::gatescope::v1::TextToken;

std::vector<float> Floats(const Tensor& t) {
  std::vector<float> v(t.data().size() / sizeof(float));
  std::memcpy(v.data(), t.data().data(), v.size() * sizeof(float));
  return v;
}

std::string Fixed3(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.3f", v);
  return buffer;
}

std::string Row(const std::string& name, const std::string& html) {
  return "<tr><th>" + HtmlEscape(name) + "</th><td>" + html + "</td></tr>";
}

// "<b>label</b> 0.934"; "(none)" without classes.
std::string PredictionHtml(const ClassList& classes) {
  if (classes.empty()) return "(no classes)";
  return "<b>" + HtmlEscape(classes.Get(0).label()) + "</b> " +
         Fixed3(classes.Get(0).probability());
}

// "label 0.934 · other 0.051 · ...".
std::string ClassesHtml(const ClassList& classes) {
  std::string out;
  for (const auto& c : classes) {
    out += (out.empty() ? "" : " \xC2\xB7 ") + HtmlEscape(c.label()) + " " +
           Fixed3(c.probability());
  }
  return out;
}

// "64 read (truncated at the model's limit)" pieces.
std::string PiecesHtml(const TextInput& text) {
  return std::to_string(text.pieces_read()) + " read" +
         (text.truncated() ? " (the text has more: truncated at the model's limit)" : "");
}

std::string TokensJson(const TextInput& text) {
  std::string out = "[";
  for (int i = 0; i < text.tokens_size(); ++i) {
    const TextToken& t = text.tokens(i);
    out += (i ? "," : "") + std::string("{\"piece\":") + JsonString(t.piece()) +
           ",\"id\":" + std::to_string(t.id()) + ",\"begin\":" + std::to_string(t.begin()) +
           ",\"end\":" + std::to_string(t.end()) + "}";
  }
  return out + "]";
}

std::string CountsJson(const TextInput& text) {
  return ",\"tokens\":" + std::to_string(text.pieces_read()) +
         ",\"truncated\":" + (text.truncated() ? "true" : "false") +
         ",\"chars_read\":" + std::to_string(text.chars_read());
}

// The rollout paragraph of a page: what the shading means, the colour bar and the text.
std::string RolloutHtml(std::string_view text, const ExplainResponse& response,
                        const std::vector<ShadedPiece>& pieces,
                        const std::vector<ShadedRun>& runs, const ColourScale& scale,
                        const MapRange& range, bool with_bar) {
  std::string out;
  if (with_bar) out += ColourBarHtml(scale, range, "rollout");
  return out + ShadedTextHtml(text, pieces, runs, scale, "rollout", response.text().truncated());
}

}  // namespace

std::string TextPredictJson(const v1::PredictResponse& response) {
  return TopClassesJson(response.classes()) + CountsJson(response.text());
}

absl::Status CheckTextExplain(const ExplainResponse& response, std::string_view text,
                              bool need_rollout) {
  const int64_t chars = static_cast<int64_t>(CodePoints(text).size());
  const auto& tokens = response.text().tokens();
  const int64_t count = tokens.size();
  int32_t last_begin = 0;
  for (int i = 0; i < tokens.size(); ++i) {
    const TextToken& t = tokens.Get(i);
    if (t.begin() < 0 || t.end() < t.begin() || t.end() > chars) {
      return absl::DataLossError("text piece " + std::to_string(i) + " has characters [" +
                                 std::to_string(t.begin()) + ", " + std::to_string(t.end()) +
                                 "), outside the text's " + std::to_string(chars));
    }
    if (t.begin() == t.end()) continue;
    if (t.begin() < last_begin) {
      return absl::DataLossError("text pieces are not in text order (piece " +
                                 std::to_string(i) + ")");
    }
    last_begin = t.begin();
  }
  if (need_rollout && !response.has_rollout()) {
    return absl::DataLossError("no rollout in the response");
  }
  if (response.has_rollout()) {
    if (absl::Status st = CheckMap(response.rollout(), 1, "rollout"); !st.ok()) return st;
    if (response.rollout().shape(0) != count) {
      return absl::DataLossError("the rollout has " + std::to_string(response.rollout().shape(0)) +
                                 " values for " + std::to_string(count) + " text pieces");
    }
  }
  if (absl::Status st = StackLayers(response.gates(), "gate", 2).status(); !st.ok()) return st;
  for (const Tensor& g : response.gates()) {
    if (g.shape(1) != count) {
      return absl::DataLossError("gate maps are not over the " + std::to_string(count) +
                                 " text pieces");
    }
  }
  for (const Tensor& a : response.attention()) {
    if (absl::Status st = CheckMap(a, 3, "attention"); !st.ok()) return st;
    if (a.shape(2) != count + 1) {
      return absl::DataLossError("attention maps are not over the class token and the " +
                                 std::to_string(count) + " text pieces");
    }
  }
  return absl::OkStatus();
}

std::vector<ShadedPiece> RolloutPieces(const ExplainResponse& response) {
  const std::vector<float> values =
      response.has_rollout() ? Floats(response.rollout()) : std::vector<float>{};
  std::vector<ShadedPiece> pieces;
  for (int i = 0; i < response.text().tokens_size(); ++i) {
    const TextToken& t = response.text().tokens(i);
    pieces.push_back({t.piece(), t.id(), t.begin(), t.end(),
                      static_cast<size_t>(i) < values.size() ? values[i] : 0.f});
  }
  return pieces;
}

std::string TruncatedNote(const TextInput& text) {
  if (!text.truncated()) return "";
  return "truncated: the model read the first " + std::to_string(text.pieces_read()) +
         " tokens, the first " + std::to_string(text.chars_read()) + " characters of the text";
}

std::vector<cv::Mat> GateHeatmaps(const ExplainResponse& response, const std::string& model,
                                  ScaleMode scale) {
  std::vector<cv::Mat> maps;
  std::vector<MapRange> ranges;
  for (const Tensor& g : response.gates()) {
    cv::Mat m(static_cast<int>(g.shape(0)), static_cast<int>(g.shape(1)), CV_32FC1);
    if (!m.empty()) std::memcpy(m.ptr<float>(), g.data().data(), g.data().size());
    ranges.push_back(RangeOf(m));
    maps.push_back(std::move(m));
  }
  std::vector<std::string> pieces;
  for (const TextToken& t : response.text().tokens()) pieces.push_back(t.piece());
  const ColourScale shared = ColourScale::For(Union(ranges));
  std::vector<cv::Mat> pictures;
  for (size_t l = 0; l < maps.size(); ++l) {
    const bool tile = scale == ScaleMode::kTile;
    cv::Mat picture = TokenHeatmap(
        maps[l], pieces, tile ? ColourScale::For(ranges[l]) : shared,
        model + ": gate L" + std::to_string(l) + " (heads x text pieces)", "h",
        tile ? "scale: this layer" : "scale: shared across layers");
    if (!picture.empty()) pictures.push_back(std::move(picture));
  }
  return pictures;
}

std::string TextExplainPage(const std::string& name, std::string_view text,
                            const ExplainResponse& response, const TextModelInfo& info,
                            const std::vector<cv::Mat>& gate_pictures, ScaleMode scale) {
  std::string html = PageStart(name + " \xC2\xB7 " + info.model) + "<h1>" + HtmlEscape(name) +
                     "</h1>\n<table class=\"meta\">" + Row("model", HtmlEscape(info.model)) +
                     Row("version", HtmlEscape(info.version)) +
                     Row("prediction", PredictionHtml(response.classes())) +
                     Row("top classes", ClassesHtml(response.classes())) +
                     Row("text pieces", PiecesHtml(response.text())) + "</table>\n";
  if (const std::string note = TruncatedNote(response.text()); !note.empty()) {
    html += "<p class=\"note\">" + HtmlEscape(note) + "</p>\n";
  }
  html += "<h2>Attention rollout over the text</h2>\n";
  if (response.has_rollout()) {
    const std::vector<ShadedPiece> pieces = RolloutPieces(response);
    const std::vector<ShadedRun> runs = ShadedRuns(pieces);
    const MapRange range = RangeOfRuns(runs);
    html += "<p class=\"what\">Each piece the model read is shaded by the class token's "
            "attention rollout to it (hover over a piece for the piece, its id and value); "
            "the characters between pieces are kept as written.</p>\n" +
            RolloutHtml(text, response, pieces, runs, ColourScale::For(range), range, true) +
            "\n";
  } else {
    html += "<p class=\"what\">No rollout in the response: the text as sent.</p>\n" +
            ShadedTextHtml(text, {}, {}, ColourScale{}, "rollout") + "\n";
  }
  if (!gate_pictures.empty()) {
    html += std::string("<h2>Gates</h2>\n<p class=\"what\">Each layer's gate for every head "
                        "(rows h0, h1, ...) and text piece (columns, as the tokenizer wrote "
                        "them: _ starts a word, ? any other non-ASCII character), ") +
            (scale == ScaleMode::kShared ? "on one colour scale across the layers."
                                         : "each layer on its own colour scale.") +
            "</p>\n";
    for (size_t l = 0; l < gate_pictures.size(); ++l) {
      const std::string alt = "gate L" + std::to_string(l);
      html += "<figure><img alt=\"" + alt + "\" src=\"" + PngDataUri(gate_pictures[l]) +
              "\"><figcaption>" + alt + ": heads x text pieces</figcaption></figure>\n";
    }
  }
  return html + PageEnd();
}

absl::StatusOr<std::string> WriteTextExplain(const InputImage& input, const std::string& stem,
                                             const ExplainRequest& request,
                                             const ExplainResponse& response,
                                             const OutputSettings& settings) {
  if (absl::Status st = CheckTextExplain(response, input.bytes); !st.ok()) return st;
  std::vector<cv::Mat> gates;
  try {
    gates = GateHeatmaps(response, settings.model, settings.scale);
  } catch (const cv::Exception&) {
    return absl::InternalError("cannot draw the gate heatmaps");
  }
  const TextModelInfo info{settings.model, settings.version};
  bool written = WriteBytes(stem + ".html", TextExplainPage(input.file, input.bytes, response,
                                                            info, gates, settings.scale));
  std::string members = ",\"page\":" + JsonString(stem + ".html") +
                        ",\"json\":" + JsonString(stem + ".json");
  if (!gates.empty()) {
    int width = 0;
    for (const cv::Mat& g : gates) width = std::max(width, g.cols);
    cv::Mat stacked = Rendered([&] {
      std::vector<cv::Mat> rows;
      for (const cv::Mat& g : gates) {
        cv::Mat row;
        cv::copyMakeBorder(g, row, 0, 4, 0, width - g.cols, cv::BORDER_CONSTANT,
                           cv::Scalar(0, 0, 0));
        rows.push_back(row);
      }
      cv::Mat all;
      cv::vconcat(rows, all);
      return all;
    });
    written &= WritePng(stem + ".gates.png", stacked);
    members += ",\"gate_heatmaps\":" + JsonString(stem + ".gates.png");
  }

  std::string json = "{\"file\":" + JsonString(input.file) + ",\"model\":" +
                     JsonString(settings.model) + ",\"version\":" + JsonString(settings.version) +
                     ",\"classes\":" + ClassesJson(response.classes()) +
                     CountsJson(response.text()) +
                     ",\"pieces\":" + TokensJson(response.text());
  if (response.has_rollout()) json += ",\"rollout\":" + TensorJson(response.rollout());
  json += ",\"gates\":" + TensorListJson(response.gates());
  std::vector<std::string> npy;
  if (settings.json_maps) {
    json += ",\"attention\":" + TensorListJson(response.attention());
  } else {
    auto add = [&](const std::string& name, const std::vector<int64_t>& shape,
                   const std::string& bytes) {
      const std::string path = stem + "." + name + ".npy";
      written &= WriteNpy(path, shape, bytes);
      npy.push_back(path);
    };
    if (response.has_rollout()) {
      add("rollout", {response.rollout().shape(0)}, response.rollout().data());
    }
    if (!response.gates().empty()) {
      const StackedMaps stacked = *StackLayers(response.gates(), "gate", 2);  // checked above
      add("gates", stacked.shape, stacked.bytes);
    }
    for (int i = 0; i < response.attention_size(); ++i) {
      const Tensor& a = response.attention(i);
      const int layer = i < request.attention_layers_size() ? request.attention_layers(i) : i;
      add("attention.L" + std::to_string(layer), {a.shape().begin(), a.shape().end()}, a.data());
    }
    std::vector<std::string> names;
    for (const std::string& path : npy) {
      names.push_back(std::filesystem::path(path).filename().string());
    }
    json += ",\"npy\":" + JsonStringArray(names);
  }
  written &= WriteBytes(stem + ".json", json + "}\n");
  if (!written) {
    return absl::InternalError("cannot render or write results under " + settings.out_dir);
  }
  if (!npy.empty()) members += ",\"npy\":" + JsonStringArray(npy);
  if (!response.classes().empty()) {
    members += ",\"label\":" + JsonString(response.classes(0).label()) +
               ",\"score\":" + JsonNumber(response.classes(0).probability());
  }
  return members + CountsJson(response.text());
}

std::string TextComparePage(const std::string& name, std::string_view text,
                            const std::vector<TextCompareRow>& rows, ScaleMode scale) {
  struct Drawn {
    std::vector<ShadedPiece> pieces;
    std::vector<ShadedRun> runs;
    MapRange range;
  };
  std::vector<Drawn> drawn(rows.size());
  std::vector<MapRange> ranges;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].response == nullptr) continue;
    drawn[i].pieces = RolloutPieces(*rows[i].response);
    drawn[i].runs = ShadedRuns(drawn[i].pieces);
    drawn[i].range = RangeOfRuns(drawn[i].runs);
    ranges.push_back(drawn[i].range);
  }
  const bool shared = scale == ScaleMode::kShared;
  const MapRange all = Union(ranges);
  std::string html =
      PageStart(name + " \xC2\xB7 compare") + "<h1>" + HtmlEscape(name) +
      "</h1>\n<p class=\"what\">The class token's attention rollout over the text, one row "
      "per model, each row cut into the pieces that model's tokenizer made (hover over a "
      "piece for the piece, its id and value); " +
      (shared ? "one colour scale across the models (<code>--scale shared</code>)."
              : "each row on its own colour scale (<code>--scale tile</code>).") +
      "</p>\n";
  if (shared) html += ColourBarHtml(ColourScale::For(all), all, "rollout, all models");
  html += "<table class=\"rows\">\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const TextCompareRow& row = rows[i];
    html += "<tr><th><div class=\"model\">" + HtmlEscape(row.info.model) + "</div>";
    if (row.response == nullptr) {
      html += "</th><td class=\"error\">error: " + HtmlEscape(row.error) + "</td></tr>\n";
      continue;
    }
    const ExplainResponse& r = *row.response;
    html += "<small>version " + HtmlEscape(row.info.version) + "</small><div>" +
            PredictionHtml(r.classes()) + "</div><small>" +
            std::to_string(r.text().tokens_size()) + " pieces read</small>";
    if (const std::string note = TruncatedNote(r.text()); !note.empty()) {
      html += "<div class=\"note\"><small>" + HtmlEscape(note) + "</small></div>";
    }
    if (shared) {
      html += "<div><small>rollout " + HtmlEscape(RangeText(drawn[i].range)) + "</small></div>";
    }
    const ColourScale own = shared ? ColourScale::For(all) : ColourScale::For(drawn[i].range);
    html += "</th><td>" +
            RolloutHtml(text, r, drawn[i].pieces, drawn[i].runs, own, drawn[i].range, !shared) +
            "</td></tr>\n";
  }
  return html + "</table>\n" + PageEnd();
}

}  // namespace gatescope::client
