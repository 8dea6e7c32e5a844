// Reads the reference values of a model's served statistics from its card
// (<model>/README.md, section "Monitoring reference", written by
// models/monitoring_reference.py), so that they travel with the model and the server can
// export them beside the histograms they describe (ModelMetrics::SetReferences).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/metrics/server_metrics.h"

namespace gatescope {

// The file name of a model's card inside its directory.
inline constexpr char kModelCardFile[] = "README.md";

// The references in the text of a card: its fenced block tagged `json monitoring-reference`,
// a JSON array of records {"metric": "gatescope_<family>", "mean": [...], "std": [...], ...}
// (other fields are ignored). No such block: an empty vector. INVALID_ARGUMENT for a block
// that is not such an array (the message says what is wrong); families are not checked
// against the served statistics here (SetReferences does that).
absl::StatusOr<std::vector<StatisticReference>> ParseMonitoringReference(std::string_view card);

// ParseMonitoringReference of the file at `path`; an empty vector if there is no such file,
// INTERNAL if it exists but cannot be read.
absl::StatusOr<std::vector<StatisticReference>> ReadMonitoringReference(const std::string& path);

}  // namespace gatescope
