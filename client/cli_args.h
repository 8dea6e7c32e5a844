// Flag parsing shared by the command-line tools: `--name value` or `--name=value`;
// everything else is a positional argument.
#pragma once

#include <iostream>
#include <map>
#include <string>
#include <vector>

namespace gatescope::client {

struct Args {
  std::map<std::string, std::string> flags;
  std::vector<std::string> positional;

  std::string Get(const std::string& key, const std::string& fallback) const {
    auto it = flags.find(key);
    return it == flags.end() ? fallback : it->second;
  }
};

// Parses argv[first..argc). False (with a message on stderr) if a flag lacks its value.
inline bool ParseArgs(int argc, char** argv, int first, Args& args) {
  for (int i = first; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--", 0) != 0) {
      args.positional.push_back(a);
      continue;
    }
    const auto eq = a.find('=');
    if (eq != std::string::npos) {
      args.flags[a.substr(2, eq - 2)] = a.substr(eq + 1);
    } else if (i + 1 < argc) {
      args.flags[a.substr(2)] = argv[++i];
    } else {
      std::cerr << "missing value for " << a << "\n";
      return false;
    }
  }
  return true;
}

}  // namespace gatescope::client
