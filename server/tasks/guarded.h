// The adapter where exceptions stop on the worker side: ATen (c10::Error), OpenCV
// (cv::Exception) and the standard library throw, gatescope returns absl::Status.
#pragma once

#include <c10/util/Exception.h>

#include <exception>

#include "absl/strings/str_cat.h"

namespace gatescope {

// Runs f (returning absl::Status or absl::StatusOr<T>); an exception becomes INTERNAL
// "<what> failed: <message>".
template <typename F>
auto Guarded(const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(what, " failed: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(what, " failed: ", e.what()));
  }
}

}  // namespace gatescope
