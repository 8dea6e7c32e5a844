#include "server/api/infer_results.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/api/kserve_tensors.h"

namespace gatescope {

InferResults::InferResults(const ::inference::ModelInferRequest* request,
                           ::inference::ModelInferResponse* response,
                           std::function<void(absl::Status)> done)
    : request_(request), response_(response), done_(std::move(done)) {}

void InferResults::Expect(size_t examples) {
  absl::MutexLock lock(&mu_);
  results_.resize(examples);
  remaining_ = examples;
}

void InferResults::Store(size_t i, NamedTensors outputs) {
  absl::MutexLock lock(&mu_);
  results_[i] = std::move(outputs);
}

void InferResults::Complete(size_t i, absl::Status status) {
  {
    absl::MutexLock lock(&mu_);
    if (!status.ok() && error_.ok()) {
      error_ = status;
      failed_ = true;
    }
    if (!status.ok()) results_[i].reset();
    if (--remaining_ > 0) return;
    if (error_.ok()) {
      try {
        error_ = BuildResponse();
      } catch (const std::exception& e) {
        error_ = absl::InternalError(absl::StrCat("building the response failed: ", e.what()));
      }
    }
    status = error_;
  }
  done_(status);
}

absl::Status InferResults::BuildResponse() {
  std::vector<std::string> names;
  if (request_->outputs_size() == 0) {
    for (const auto& [name, t] : *results_.front()) names.push_back(name);
    std::sort(names.begin(), names.end());
  } else {
    for (const auto& o : request_->outputs()) names.push_back(o.name());
  }
  for (const std::string& name : names) {
    std::vector<at::Tensor> rows;
    for (const auto& r : results_) {
      if (!r.has_value()) return absl::InternalError("an example finished without outputs");
      auto it = r->find(name);
      if (it == r->end()) {
        return absl::InvalidArgumentError(absl::StrCat("model has no output '", name, "'"));
      }
      rows.push_back(it->second);
    }
    if (absl::Status st = AppendOutput(name, rows, response_); !st.ok()) return st;
  }
  return absl::OkStatus();
}

}  // namespace gatescope
