#include "server/preprocess/sentencepiece_model.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <utility>

namespace gatescope {
namespace {

constexpr char kShimName[] = "libgatescope_sentencepiece.so";

// The shim's entry points (sentencepiece_shim.cc), resolved once per process.
struct ShimApi {
  void* (*load)(const char*, size_t, char*, size_t) = nullptr;
  void (*free_model)(void*) = nullptr;
  void* (*scratch_new)() = nullptr;
  void (*scratch_free)(void*) = nullptr;
  int64_t (*encode)(void*, void*, const char*, size_t, int32_t*, int64_t, char*, size_t) = nullptr;
  int32_t (*vocab_size)(void*) = nullptr;
  int32_t (*pad_id)(void*) = nullptr;
  int64_t (*piece)(void*, int32_t, char*, int64_t) = nullptr;
  std::string error;  // why the shim is unusable; empty when it loaded
};

std::string ExecutableDir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

std::string ShimPath() {
  if (const char* env = std::getenv("GATESCOPE_SENTENCEPIECE_SHIM"); env != nullptr && *env) {
    return env;
  }
  const std::string dir = ExecutableDir();
  for (const std::string& candidate : {dir + "/" + kShimName,  // the build tree
                                       dir + "/../lib/gatescope/" + kShimName}) {  // installed
    if (std::filesystem::exists(candidate)) return candidate;
  }
  return std::string(GATESCOPE_SENTENCEPIECE_SHIM_BUILT) + "/" + kShimName;
}

template <typename F>
bool Resolve(void* lib, const char* name, F* f, std::string* error) {
  *f = reinterpret_cast<F>(dlsym(lib, name));
  if (*f == nullptr) *error = std::string("the SentencePiece shim lacks ") + name;
  return *f != nullptr;
}

ShimApi LoadShim() {
  ShimApi api;
  const std::string path = ShimPath();
  // A namespace of its own: the shim's SentencePiece (and the protobuf inside it) never
  // meets the server's libprotobuf. Kept loaded for the process's lifetime.
  void* lib = dlmopen(LM_ID_NEWLM, path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    api.error = "cannot load the SentencePiece shim " + path + ": " + (why ? why : "unknown");
    return api;
  }
  if (!Resolve(lib, "gs_spm_load", &api.load, &api.error) ||
      !Resolve(lib, "gs_spm_free", &api.free_model, &api.error) ||
      !Resolve(lib, "gs_spm_scratch_new", &api.scratch_new, &api.error) ||
      !Resolve(lib, "gs_spm_scratch_free", &api.scratch_free, &api.error) ||
      !Resolve(lib, "gs_spm_encode", &api.encode, &api.error) ||
      !Resolve(lib, "gs_spm_vocab_size", &api.vocab_size, &api.error) ||
      !Resolve(lib, "gs_spm_pad_id", &api.pad_id, &api.error) ||
      !Resolve(lib, "gs_spm_piece", &api.piece, &api.error)) {
    return api;
  }
  return api;
}

const ShimApi& Shim() {
  // Thread-safe once, and never destroyed: a thread still running at exit (a gRPC thread
  // is not always joined) may free its scratch after static destructors have run.
  static const ShimApi* const api = new ShimApi(LoadShim());
  return *api;
}

// This thread's scratch message in the shim (gs_spm_scratch_new), freed when the thread
// exits. A scratch that grew past kMaxScratchPieces for a long text is replaced, so that a
// thread does not hold a long text's pieces for good.
class ThreadScratch {
 public:
  static constexpr int64_t kMaxScratchPieces = 4096;

  ~ThreadScratch() {
    if (scratch_ != nullptr) Shim().scratch_free(scratch_);
  }
  void* get() {
    if (scratch_ == nullptr) scratch_ = Shim().scratch_new();
    return scratch_;
  }
  void Used(int64_t pieces) {
    if (pieces <= kMaxScratchPieces) return;
    Shim().scratch_free(scratch_);
    scratch_ = nullptr;
  }

 private:
  void* scratch_ = nullptr;
};

std::string PieceOf(void* handle, int32_t id) {
  std::string piece(64, '\0');
  const int64_t n = Shim().piece(handle, id, piece.data(), static_cast<int64_t>(piece.size()));
  if (n > static_cast<int64_t>(piece.size())) {
    piece.resize(n);
    Shim().piece(handle, id, piece.data(), n);
  }
  piece.resize(n);
  return piece;
}

}  // namespace

SentencePieceModel::SentencePieceModel(void* handle, std::vector<std::string> vocabulary,
                                       int pad_id)
    : handle_(handle), vocabulary_(std::move(vocabulary)), pad_id_(pad_id) {}

SentencePieceModel::~SentencePieceModel() { Shim().free_model(handle_); }

std::unique_ptr<SentencePieceModel> SentencePieceModel::FromSerialized(
    const std::string& model_proto, std::string* error) {
  const ShimApi& api = Shim();
  if (!api.error.empty()) {
    *error = api.error;
    return nullptr;
  }
  char message[512] = "";
  void* handle = api.load(model_proto.data(), model_proto.size(), message, sizeof(message));
  if (handle == nullptr) {
    *error = message;
    return nullptr;
  }
  std::vector<std::string> vocabulary(api.vocab_size(handle));
  for (size_t id = 0; id < vocabulary.size(); ++id) {
    vocabulary[id] = PieceOf(handle, static_cast<int32_t>(id));
  }
  return std::unique_ptr<SentencePieceModel>(
      new SentencePieceModel(handle, std::move(vocabulary), api.pad_id(handle)));
}

bool SentencePieceModel::Encode(std::string_view text, std::vector<TextPiece>* pieces,
                                std::string* error) const {
  const ShimApi& api = Shim();
  thread_local ThreadScratch scratch;
  char message[512] = "";
  // Pieces never outnumber bytes by much (each byte is at most one piece, plus the word
  // boundary marker), so one retry at most.
  std::vector<int32_t> spans(3 * (text.size() + 8));
  int64_t n = api.encode(handle_, scratch.get(), text.data(), text.size(), spans.data(),
                         static_cast<int64_t>(spans.size() / 3), message, sizeof(message));
  if (n > static_cast<int64_t>(spans.size() / 3)) {
    spans.resize(3 * n);
    n = api.encode(handle_, scratch.get(), text.data(), text.size(), spans.data(), n, message,
                   sizeof(message));
  }
  scratch.Used(n);
  if (n < 0) {
    *error = message;
    return false;
  }
  pieces->resize(n);
  for (int64_t i = 0; i < n; ++i) {
    (*pieces)[i] = {spans[3 * i], spans[3 * i + 1], spans[3 * i + 2]};
  }
  return true;
}

}  // namespace gatescope
