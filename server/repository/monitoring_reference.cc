#include "server/repository/monitoring_reference.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gatescope {
namespace {

constexpr std::string_view kBlockStart = "```json monitoring-reference\n";
constexpr std::string_view kBlockEnd = "\n```";
constexpr char kMetricPrefix[] = "gatescope_";

absl::Status Invalid(const std::string& what) {
  return absl::InvalidArgumentError("monitoring reference: " + what);
}

// The numbers of `record[key]`, an array of numbers.
absl::StatusOr<std::vector<double>> Numbers(const nlohmann::json& record, const char* key) {
  auto it = record.find(key);
  if (it == record.end() || !it->is_array()) return Invalid(absl::StrCat("no array '", key, "'"));
  std::vector<double> values;
  for (const auto& v : *it) {
    if (!v.is_number()) return Invalid(absl::StrCat("'", key, "' holds a non-number"));
    values.push_back(v.get<double>());
  }
  return values;
}

absl::StatusOr<StatisticReference> Record(const nlohmann::json& record) {
  if (!record.is_object()) return Invalid("a record is not an object");
  auto metric = record.find("metric");
  if (metric == record.end() || !metric->is_string() ||
      !absl::StartsWith(metric->get_ref<const std::string&>(), kMetricPrefix)) {
    return Invalid("a record has no \"metric\": \"gatescope_<name>\"");
  }
  StatisticReference reference;
  reference.family = metric->get<std::string>().substr(sizeof(kMetricPrefix) - 1);
  absl::StatusOr<std::vector<double>> mean = Numbers(record, "mean");
  if (!mean.ok()) return mean.status();
  absl::StatusOr<std::vector<double>> stddev = Numbers(record, "std");
  if (!stddev.ok()) return stddev.status();
  reference.mean = *std::move(mean);
  reference.stddev = *std::move(stddev);
  return reference;
}

}  // namespace

absl::StatusOr<std::vector<StatisticReference>> ParseMonitoringReference(std::string_view card) {
  std::vector<StatisticReference> references;
  const size_t start = card.find(kBlockStart);
  if (start == std::string_view::npos) return references;
  const size_t body = start + kBlockStart.size();
  const size_t end = card.find(kBlockEnd, body);
  if (end == std::string_view::npos) return Invalid("the block is not closed");
  const nlohmann::json parsed =
      nlohmann::json::parse(card.substr(body, end - body), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_array()) return Invalid("the block is not a JSON array");
  for (const auto& record : parsed) {
    absl::StatusOr<StatisticReference> one = Record(record);
    if (!one.ok()) return one.status();
    references.push_back(*std::move(one));
  }
  return references;
}

absl::StatusOr<std::vector<StatisticReference>> ReadMonitoringReference(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::vector<StatisticReference>();
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InternalError(absl::StrCat("cannot open ", path));
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) return absl::InternalError(absl::StrCat("cannot read ", path));
  // A card saved with Windows line ends reads the same.
  text.erase(std::remove(text.begin(), text.end(), '\r'), text.end());
  return ParseMonitoringReference(text);
}

}  // namespace gatescope
