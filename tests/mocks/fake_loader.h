// ModelLoader fake: a "model file" is its metadata JSON in plain text, and every instance
// is a FakeRunner, so repository and server tests run without TorchScript. It can also
// refuse op libraries and GPUs. Thread-safe.
#pragma once

#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/runtime/model_loader.h"
#include "tests/mocks/fake_runner.h"

namespace gatescope::testing {

class FakeLoader : public ModelLoader {
 public:
  // The op libraries that count as loaded (default: "gatescope").
  void SetLoadedOps(std::set<std::string> ops) {
    absl::MutexLock l(&mu_);
    ops_ = std::move(ops);
  }
  // How many GPUs instances may use (default: none).
  void SetGpus(int gpus) {
    absl::MutexLock l(&mu_);
    gpus_ = gpus;
  }
  // Runners made so far.
  int loads() const {
    absl::MutexLock l(&mu_);
    return loads_;
  }
  // The runners made so far, in order; owned by their instances (valid while those live).
  std::vector<FakeRunner*> runners() const {
    absl::MutexLock l(&mu_);
    return runners_;
  }
  // GPU instances with cuda_graphs made from now on record graphs (the default), or, as
  // in a server built without them, do not.
  void SetGraphsAvailable(bool available) {
    absl::MutexLock l(&mu_);
    graphs_available_ = available;
  }
  // Runners made from now on fail every call with `st` (OK: they answer).
  void FailNewRunnersWith(absl::Status st) {
    absl::MutexLock l(&mu_);
    fail_new_ = std::move(st);
  }

  absl::StatusOr<std::string> ReadMetadata(const std::string& path) const override {
    std::ifstream in(path);
    if (!in) return absl::NotFoundError(absl::StrCat("no model file at ", path));
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  // Every archive from now on carries an extra file `name` holding `bytes` (a text
  // model's tokenizer, say).
  void SetExtraFile(const std::string& name, std::string bytes) {
    absl::MutexLock l(&mu_);
    extra_files_[name] = std::move(bytes);
  }
  // Extra files of the fake archives: those set, none by default.
  absl::StatusOr<std::string> ReadExtraFile(const std::string& path,
                                            const std::string& name) const override {
    absl::MutexLock l(&mu_);
    auto it = extra_files_.find(name);
    if (it != extra_files_.end()) return it->second;
    return absl::NotFoundError(absl::StrCat(path, " has no extra file '", name, "'"));
  }
  absl::Status CheckOps(const std::string& name) const override {
    absl::MutexLock l(&mu_);
    if (ops_.count(name)) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat("op library '", name, "' is not loaded"));
  }
  absl::StatusOr<std::unique_ptr<ModelRunner>> Load(const std::string& path,
                                                    const InstanceSpec& spec) const override {
    if (!std::ifstream(path)) return absl::NotFoundError(absl::StrCat("no model file at ", path));
    absl::MutexLock l(&mu_);
    if (spec.kind == InstanceSpec::Kind::kGpu && spec.device >= gpus_) {
      return absl::UnavailableError(absl::StrCat("GPU ", spec.device, " is not available"));
    }
    ++loads_;
    auto runner = std::make_unique<FakeRunner>(3);
    runner->FailWith(fail_new_);
    runner->SetRecordsCudaGraphs(spec.kind == InstanceSpec::Kind::kGpu && spec.cuda_graphs &&
                                 graphs_available_);
    runners_.push_back(runner.get());
    return std::unique_ptr<ModelRunner>(std::move(runner));
  }
  DeviceInventory Devices() const override {
    absl::MutexLock l(&mu_);
    return {gpus_, gpus_ == 0 ? "the fake loader has none" : ""};
  }

 private:
  mutable absl::Mutex mu_;
  std::set<std::string> ops_ ABSL_GUARDED_BY(mu_) = {"gatescope"};
  int gpus_ ABSL_GUARDED_BY(mu_) = 0;
  bool graphs_available_ ABSL_GUARDED_BY(mu_) = true;
  mutable int loads_ ABSL_GUARDED_BY(mu_) = 0;
  mutable std::vector<FakeRunner*> runners_ ABSL_GUARDED_BY(mu_);
  absl::Status fail_new_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> extra_files_ ABSL_GUARDED_BY(mu_);

};

}  // namespace gatescope::testing
