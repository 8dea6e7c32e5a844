#include "server/api/infer_results.h"

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/api/kserve_tensors.h"

namespace gatescope {

InferResults::InferResults(const ::inference::ModelInferRequest* request,
                           ::inference::ModelInferResponse* response,
                           std::function<void(absl::Status)> done,
                           OutputDeclaration declared)
    : request_(request), response_(response), done_(std::move(done)),
      declared_(std::move(declared)) {}

absl::StatusOr<int64_t> ClassCount(
    const ::inference::ModelInferRequest::InferRequestedOutputTensor& output) {
  auto it = output.parameters().find("classification");
  if (it == output.parameters().end()) return 0;
  int64_t k = 0;
  switch (it->second.parameter_choice_case()) {
    case ::inference::InferParameter::kInt64Param: k = it->second.int64_param(); break;
    case ::inference::InferParameter::kUint64Param:
      k = it->second.uint64_param() > (uint64_t{1} << 31) ? -1
                                                          : static_cast<int64_t>(it->second.uint64_param());
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "output '", output.name(), "': classification must be an integer parameter"));
  }
  if (k < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("output '", output.name(), "': classification count must be >= 1"));
  }
  return k;
}

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
  std::vector<int64_t> class_counts;
  if (request_->outputs_size() == 0) {
    const NamedTensors& first = *results_.front();
    for (const std::string& name : declared_.order) {
      if (first.count(name) > 0) names.push_back(name);
    }
    std::vector<std::string> others;
    for (const auto& [name, t] : first) {
      if (std::find(names.begin(), names.end(), name) == names.end()) others.push_back(name);
    }
    std::sort(others.begin(), others.end());
    names.insert(names.end(), others.begin(), others.end());
    class_counts.assign(names.size(), 0);
  } else {
    for (const auto& o : request_->outputs()) {
      names.push_back(o.name());
      absl::StatusOr<int64_t> k = ClassCount(o);
      if (!k.ok()) return k.status();
      class_counts.push_back(*k);
    }
  }
  for (size_t n = 0; n < names.size(); ++n) {
    const std::string& name = names[n];
    std::vector<at::Tensor> rows;
    for (const auto& r : results_) {
      if (!r.has_value()) return absl::InternalError("an example finished without outputs");
      auto it = r->find(name);
      if (it == r->end()) {
        return absl::InvalidArgumentError(absl::StrCat("model has no output '", name, "'"));
      }
      rows.push_back(it->second);
    }
    absl::Status st = class_counts[n] > 0
                          ? AppendClassification(name, rows, class_counts[n], declared_.labels,
                                                 response_)
                          : AppendOutput(name, rows, response_);
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

}  // namespace gatescope
