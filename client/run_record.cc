#include "client/run_record.h"

#include <cctype>
#include <filesystem>
#include <map>
#include <system_error>

// nlohmann::json (Debian nlohmann-json3-dev, header-only): run.json nests the output lines
// as objects, which needs a parser, and writes them back with correct escaping.
#include <nlohmann/json.hpp>

#include "absl/time/clock.h"
#include "client/file_io.h"
#include "client/text_view.h"

namespace gatescope::client {
namespace {

using nlohmann::json;

// "2026-11-24T23:59:01.123Z"
std::string IsoTime(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone());
}

// `path` as index.html and run.json name it: relative to `out_dir` when it lies inside.
std::string Relative(const std::string& path, const std::string& out_dir) {
  const std::filesystem::path rel =
      std::filesystem::path(path).lexically_relative(std::filesystem::path(out_dir));
  if (rel.empty() || rel.begin()->string() == "..") return path;
  return rel.string();
}

bool EndsWith(const std::string& text, const std::string& end) {
  return text.size() > end.size() && text.compare(text.size() - end.size(), end.size(), end) == 0;
}

// Every string member of a line that names a file under `out_dir`, made relative, with
// the PNGs and HTML pages collected as (key, relative path) in line order.
void RelativizeOutputs(json& value, const std::string& key, const std::string& out_dir,
                       std::vector<std::pair<std::string, std::string>>& pictures) {
  if (value.is_string()) {
    const std::string text = value.get<std::string>();
    std::error_code ec;
    if (key != "file" && key != "label" && key != "model" && key != "message" &&
        Relative(text, out_dir) != text && std::filesystem::is_regular_file(text, ec)) {
      value = Relative(text, out_dir);
      if (EndsWith(text, ".png") || EndsWith(text, ".html")) {
        pictures.emplace_back(key, value.get<std::string>());
      }
    }
  } else if (value.is_object()) {
    for (auto& [k, v] : value.items()) RelativizeOutputs(v, k, out_dir, pictures);
  } else if (value.is_array()) {
    for (json& v : value) RelativizeOutputs(v, key, out_dir, pictures);
  }
}

// A relative path as a URL that can only be that file: "./" and every byte outside the
// unreserved set percent-encoded (so "javascript:x.png" or "a#b.png" stay file names).
std::string FileUrl(const std::string& path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string url = "./";
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
      url += static_cast<char>(c);
    } else {
      url += '%';
      url += kHex[c >> 4];
      url += kHex[c & 15];
    }
  }
  return url;
}

std::string Html(const std::string& text) { return HtmlEscape(text); }

// A short description of a line for its heading: the top label and score, the
// detections, or the error.
std::string LineSummary(const json& line) {
  if (auto e = line.find("error"); e != line.end() && e->is_object()) {
    return "error " + e->value("code", std::string()) + ": " + e->value("message", std::string());
  }
  std::string text;
  if (line.contains("label") && line["label"].is_string()) text = line["label"].get<std::string>();
  if (line.contains("score") && line["score"].is_number()) {
    text += " " + json(line["score"].get<double>()).dump();
  }
  if (auto d = line.find("detections"); d != line.end() && d->is_array()) {
    text += std::to_string(d->size()) + " detections";
  }
  return text;
}

std::string IndexHtml(const json& record,
                      const std::vector<std::vector<std::pair<std::string, std::string>>>& pictures) {
  std::string html =
      "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<title>gatescope run</title><style>"
      "body{font-family:sans-serif;background:#111;color:#eee;margin:1.5em}"
      "figure{display:inline-block;margin:0 1em 1em 0;vertical-align:top}"
      "img{image-rendering:pixelated;max-width:100%;border:1px solid #444}"
      "figcaption{font-size:.85em;color:#bbb;max-width:40em}"
      "code,a{color:#9cf}table{border-collapse:collapse}td{padding:0 1em 0 0}"
      "</style></head><body>\n<h1>gatescope-client " +
      Html(record.value("command", std::string())) + "</h1>\n<table>";
  for (const char* key : {"model", "version", "task", "server", "started", "finished"}) {
    if (record.contains(key) && record[key].is_string() && !record[key].get<std::string>().empty()) {
      html += "<tr><td>" + std::string(key) + "</td><td><code>" +
              Html(record[key].get<std::string>()) + "</code></td></tr>";
    }
  }
  std::string command_line;
  for (const auto& arg : record["command_line"]) {
    command_line += " " + arg.get<std::string>();
  }
  html += "<tr><td>command</td><td><code>" + Html(command_line) + "</code></td></tr></table>\n";
  const json& outputs = record["outputs"];
  for (size_t i = 0; i < outputs.size(); ++i) {
    const json& line = outputs[i];
    html += "<section><h2>" + Html(line.value("file", std::string())) + " <small>" +
            Html(LineSummary(line)) + "</small></h2>\n";
    for (const auto& [key, path] : pictures[i]) {
      const std::string url = Html(FileUrl(path));
      if (EndsWith(path, ".html")) {  // a page of its own (text models): a link
        html += "<p><a href=\"" + url + "\">" + Html(path) + "</a>: " + Html(PictureCaption(key)) +
                "</p>\n";
        continue;
      }
      html += "<figure><a href=\"" + url + "\"><img src=\"" + url + "\" alt=\"" +
              Html(key) + "\"></a><figcaption><b>" + Html(path) + "</b>: " +
              Html(PictureCaption(key)) + "</figcaption></figure>\n";
    }
    html += "</section>\n";
  }
  return html + "<p><a href=\"run.json\">run.json</a>: the full record.</p></body></html>\n";
}

}  // namespace

std::string PictureCaption(const std::string& key) {
  static const auto* captions = new std::map<std::string, std::string>{
      {"panel", "the input, then each map over it (rollout, gates per layer, resonance, PLuG "
                "gates), each kind on one colour scale with its bar and value range"},
      {"png", "the server's rollout heatmap with its colour bar"},
      {"compare", "the models side by side on one input, on shared colour scales"},
      {"mask", "the predicted classes over the input, with the pixel count of each class"},
      {"mask_raw", "the class index of every pixel (a label image)"},
      {"gates", "the GDLA gate of every stage over the input"},
      {"query_attention", "the attention of the marked pixel at every stage"},
      {"boxes", "the detections with their labels and scores"},
      {"sampling_points", "the last decoder layer's sampling points of each detection, sized "
                          "by attention weight"},
      {"encoder_plug_gates", "the PLuG gate of every encoder layer and level"},
      {"page", "the text with each piece shaded by its rollout (hover for piece, id and "
               "value), then the gate heatmaps per layer: a self-contained page"},
      {"gate_heatmaps", "the gate of every head over the text's pieces, one layer under "
                        "another, with colour bars"},
  };
  const auto it = captions->find(key);
  return it == captions->end() ? key : it->second;
}

absl::Status ClaimOutDir(const std::string& out_dir, bool overwrite) {
  std::error_code ec;
  const std::filesystem::path record = std::filesystem::path(out_dir) / kRunRecordFile;
  if (!overwrite && std::filesystem::exists(record, ec)) {
    return absl::FailedPreconditionError(
        out_dir + " holds the results of an earlier run (" + kRunRecordFile +
        "); choose another --out or pass --overwrite");
  }
  return absl::OkStatus();
}

absl::Status WriteRunRecord(const std::string& out_dir, const RunFlags& flags,
                            const Report& report) {
  json record = {
      {"tool", "gatescope-client"},
      {"command", flags.command},
      {"command_line", flags.command_line},
      {"server", flags.server},
      {"model", report.model()},
      {"version", report.version()},
      {"task", report.task()},
      {"started", IsoTime(flags.started)},
      {"finished", IsoTime(absl::Now())},
      {"failures", report.failures()},
  };
  json outputs = json::array();
  std::vector<std::vector<std::pair<std::string, std::string>>> pictures;
  for (const std::string& text : report.lines()) {
    json line = json::parse(text, nullptr, /*allow_exceptions=*/false);
    // A line naming a file that is not UTF-8 is no JSON nlohmann accepts: kept as text.
    if (line.is_discarded()) line = json{{"line", text}};
    pictures.emplace_back();
    RelativizeOutputs(line, "", out_dir, pictures.back());
    outputs.push_back(std::move(line));
  }
  record["outputs"] = std::move(outputs);
  const std::filesystem::path dir(out_dir);
  // Arguments and names that are not UTF-8 are written with U+FFFD rather than refused.
  const std::string text = record.dump(2, ' ', false, json::error_handler_t::replace);
  if (!WriteBytes((dir / kRunRecordFile).string(), text + "\n") ||
      !WriteBytes((dir / kRunIndexFile).string(), IndexHtml(record, pictures))) {
    return absl::InternalError("cannot write " + (dir / kRunRecordFile).string());
  }
  return absl::OkStatus();
}

}  // namespace gatescope::client
