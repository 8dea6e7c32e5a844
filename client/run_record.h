// The provenance of an output directory: run.json (what ran, against which model version,
// with which options, when, and every input's outputs) and index.html (the run's pictures
// with their captions), written when a command that writes files ends.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/options.h"
#include "client/report.h"

namespace gatescope::client {

inline constexpr char kRunRecordFile[] = "run.json";
inline constexpr char kRunIndexFile[] = "index.html";

// OK if `out_dir` holds no run.json of an earlier run, or `overwrite`; otherwise
// FAILED_PRECONDITION naming the directory, so that no earlier result is silently replaced.
absl::Status ClaimOutDir(const std::string& out_dir, bool overwrite);

// Writes `out_dir`/run.json and index.html from `flags` and the lines `report` printed
// (outputs are listed by file name, relative to `out_dir`). Blocking file I/O.
absl::Status WriteRunRecord(const std::string& out_dir, const RunFlags& flags,
                            const Report& report);

// The caption index.html gives a picture of `key` (a JSON member of an output line).
std::string PictureCaption(const std::string& key);

}  // namespace gatescope::client
