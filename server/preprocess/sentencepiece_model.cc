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
  int64_t (*encode)(void*, const char*, size_t, int32_t*, int64_t, char*, size_t) = nullptr;
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
      !Resolve(lib, "gs_spm_encode", &api.encode, &api.error) ||
      !Resolve(lib, "gs_spm_vocab_size", &api.vocab_size, &api.error) ||
      !Resolve(lib, "gs_spm_pad_id", &api.pad_id, &api.error) ||
      !Resolve(lib, "gs_spm_piece", &api.piece, &api.error)) {
    return api;
  }
  return api;
}

const ShimApi& Shim() {
  static const ShimApi api = LoadShim();  // thread-safe once
  return api;
}

}  // namespace

SentencePieceModel::SentencePieceModel(void* handle) : handle_(handle) {}

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
  return std::unique_ptr<SentencePieceModel>(new SentencePieceModel(handle));
}

bool SentencePieceModel::Encode(std::string_view text, std::vector<TextPiece>* pieces,
                                std::string* error) const {
  const ShimApi& api = Shim();
  char message[512] = "";
  // Pieces never outnumber bytes by much (each byte is at most one piece, plus the word
  // boundary marker), so one retry at most.
  std::vector<int32_t> spans(3 * (text.size() + 8));
  int64_t n = api.encode(handle_, text.data(), text.size(), spans.data(),
                         static_cast<int64_t>(spans.size() / 3), message, sizeof(message));
  if (n > static_cast<int64_t>(spans.size() / 3)) {
    spans.resize(3 * n);
    n = api.encode(handle_, text.data(), text.size(), spans.data(), n, message, sizeof(message));
  }
  if (n < 0) {
    *error = message;
    return false;
  }
  pieces->clear();
  pieces->reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    pieces->push_back({spans[3 * i], IdToPiece(spans[3 * i]), spans[3 * i + 1], spans[3 * i + 2]});
  }
  return true;
}

int SentencePieceModel::vocab_size() const { return Shim().vocab_size(handle_); }

int SentencePieceModel::pad_id() const { return Shim().pad_id(handle_); }

std::string SentencePieceModel::IdToPiece(int id) const {
  std::string piece(64, '\0');
  const int64_t n = Shim().piece(handle_, id, piece.data(), static_cast<int64_t>(piece.size()));
  if (n > static_cast<int64_t>(piece.size())) {
    piece.resize(n);
    Shim().piece(handle_, id, piece.data(), n);
  }
  piece.resize(n);
  return piece;
}

}  // namespace gatescope
