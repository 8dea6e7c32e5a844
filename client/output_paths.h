// Where a command writes each input's files under --out.
#pragma once

#include <set>
#include <string>

#include "absl/status/status.h"

namespace gatescope::client {

// Creates `dir` (and its parents) unless it exists; an error if it cannot.
absl::Status MakeOutDir(const std::string& dir);

// Output path prefixes of one command's inputs. Not thread-safe; remembers the names it
// gave so that no input's files overwrite another's.
class OutputPaths {
 public:
  // `several_inputs`: whether the command has more than one input (see Prefix).
  OutputPaths(std::string out_dir, bool several_inputs)
      : out_dir_(std::move(out_dir)), several_inputs_(several_inputs) {}

  // DIR/<file name> (extension kept); a repeated name gets .2, .3, ...
  std::string Stem(const std::string& file);

  // DIR/ when the command has one input, else Stem(file) + ".": the prefix of fixed file
  // names such as mask.png.
  std::string Prefix(const std::string& file);

 private:
  std::string out_dir_;
  bool several_inputs_;
  std::set<std::string> used_;
};

}  // namespace gatescope::client
