// Minimal stderr logging (Debian's Abseil has no absl/log). Thread-safe line writes.
#pragma once

#include <iostream>
#include <sstream>

namespace gatescope {

class LogLine {
 public:
  explicit LogLine(const char* level) { stream_ << "[gatescope " << level << "] "; }
  ~LogLine() {
    stream_ << '\n';
    std::cerr << stream_.str() << std::flush;
  }
  template <typename T>
  LogLine& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  std::ostringstream stream_;
};

}  // namespace gatescope

#define GS_LOG(level) ::gatescope::LogLine(#level)
