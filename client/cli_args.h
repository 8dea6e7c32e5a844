// Flag parsing shared by the command-line tools: `--name value` or `--name=value`;
// everything else is a positional argument.
#pragma once

#include <algorithm>
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

// Parses argv[first..argc). Flags named in `switches` take no value (they are set to
// "true"). False (with a message on stderr) if another flag lacks its value.
inline bool ParseArgs(int argc, char** argv, int first, Args& args,
                      const std::vector<std::string>& switches = {}) {
  for (int i = first; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--", 0) != 0) {
      args.positional.push_back(a);
      continue;
    }
    const auto eq = a.find('=');
    if (eq != std::string::npos) {
      args.flags[a.substr(2, eq - 2)] = a.substr(eq + 1);
    } else if (std::find(switches.begin(), switches.end(), a.substr(2)) != switches.end()) {
      args.flags[a.substr(2)] = "true";
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
