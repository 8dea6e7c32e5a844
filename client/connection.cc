#include "client/connection.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>

namespace gatescope::client {
namespace {

constexpr size_t kMaxFlagFileBytes = 1 << 20;  // PEM bundles and tokens are far smaller
constexpr char kWhitespace[] = " \t\r\n\v\f";

// How errors name the token file, which may come from the environment.
std::string TokenFileName(const std::string& path) {
  return std::string("--token-file (or $") + kTokenFileEnv + ") '" + path + "'";
}

// The contents of `path`; INVALID_ARGUMENT starting with `name` when it cannot be read.
absl::StatusOr<std::string> ReadSmallFile(const std::string& name, const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                       &std::fclose);
  if (file == nullptr) return absl::InvalidArgumentError(name + ": " + std::strerror(errno));
  std::string text;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, file.get())) > 0;) {
    text.append(buffer, n);
    if (text.size() > kMaxFlagFileBytes) {
      return absl::InvalidArgumentError(name + " is larger than 1 MiB");
    }
  }
  if (std::ferror(file.get())) {
    return absl::InvalidArgumentError(name + ": " + std::strerror(errno));
  }
  return text;
}

// The PEM file of `flag`; INVALID_ARGUMENT when it cannot be read or lacks `marker`.
absl::StatusOr<std::string> ReadPem(const std::string& flag, const std::string& path,
                                    std::string_view marker) {
  const std::string name = flag + " '" + path + "'";
  absl::StatusOr<std::string> pem = ReadSmallFile(name, path);
  if (pem.ok() && pem->find(marker) == std::string::npos) {
    return absl::InvalidArgumentError(name + " is not PEM (no " + std::string(marker) + ")");
  }
  return pem;
}

// A channel to `options.server` with `credentials`, taking large explanations, over a TCP
// connection of its own: gRPC otherwise shares one connection between channels with the
// same target and arguments, and gatescope-perf opens several to spread its load.
std::shared_ptr<grpc::Channel> NewChannel(const ConnectionOptions& options,
                                          const std::shared_ptr<grpc::ChannelCredentials>& creds) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxSendMessageSize(16 << 20);
  args.SetMaxReceiveMessageSize(256 << 20);  // explanations with many layers are large
  if (!options.tls_server_name.empty()) args.SetSslTargetNameOverride(options.tls_server_name);
  return grpc::CreateCustomChannel(options.server, creds, args);
}

// `method` of the client's stub on `request` with a deadline `timeout_ms` from now.
template <typename Request, typename Response>
absl::StatusOr<Response> Call(const InferenceClient& client,
                              grpc::Status (v1::Inference::Stub::*method)(grpc::ClientContext*,
                                                                          const Request&,
                                                                          Response*),
                              const Request& request, int timeout_ms) {
  const std::unique_ptr<grpc::ClientContext> ctx = client.connection.NewContext(timeout_ms);
  Response response;
  if (const grpc::Status st = (*client.stub.*method)(ctx.get(), request, &response); !st.ok()) {
    return FromGrpc(st);
  }
  return response;
}

}  // namespace

absl::StatusOr<grpc::SslCredentialsOptions> ReadTlsFiles(const ConnectionOptions& options) {
  grpc::SslCredentialsOptions ssl;
  absl::StatusOr<std::string> ca = ReadPem("--tls-ca", options.tls_ca, "-----BEGIN CERTIFICATE");
  if (!ca.ok()) return ca.status();
  ssl.pem_root_certs = *std::move(ca);
  if (options.tls_cert.empty()) return ssl;
  absl::StatusOr<std::string> cert =
      ReadPem("--tls-cert", options.tls_cert, "-----BEGIN CERTIFICATE");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem("--tls-key", options.tls_key, "PRIVATE KEY-----");
  if (!key.ok()) return key.status();
  ssl.pem_cert_chain = *std::move(cert);
  ssl.pem_private_key = *std::move(key);
  return ssl;
}

Connection::Connection(std::shared_ptr<grpc::Channel> channel, std::string token)
    : channel_(std::move(channel)), token_(std::move(token)) {}

std::unique_ptr<grpc::ClientContext> Connection::NewContext(int timeout_ms) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(DeadlineAfter(timeout_ms));
  if (!token_.empty()) {
    auto [key, value] = AuthorizationMetadata(token_);
    ctx->AddMetadata(key, value);
  }
  return ctx;
}

absl::Status CheckConnectionOptions(const ConnectionOptions& options) {
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError(options.tls_cert.empty() ? "--tls-key needs --tls-cert"
                                                               : "--tls-cert needs --tls-key");
  }
  if (options.tls_ca.empty() && !options.tls_cert.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key need --tls-ca");
  }
  if (options.tls_ca.empty() && !options.tls_server_name.empty()) {
    return absl::InvalidArgumentError("--tls-server-name needs --tls-ca");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  const std::string name = TokenFileName(path);
  absl::StatusOr<std::string> text = ReadSmallFile(name, path);
  if (!text.ok()) return text.status();
  std::string_view rest = *text;
  while (!rest.empty()) {
    const size_t end = rest.find('\n');
    std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    const size_t first = line.find_first_not_of(kWhitespace);
    if (first == std::string_view::npos || line[first] == '#') continue;
    line = line.substr(first, line.find_last_not_of(kWhitespace) - first + 1);
    for (const char c : line) {
      if (c < 0x21 || c > 0x7e) {
        return absl::InvalidArgumentError(
            name + ": the token holds a space, control or non-ASCII character");
      }
    }
    return std::string(line);
  }
  return absl::InvalidArgumentError(name + " holds no token (every line is empty or a # comment)");
}

std::pair<std::string, std::string> AuthorizationMetadata(const std::string& token) {
  return {"authorization", "Bearer " + token};
}

absl::StatusOr<Connection> OpenConnection(const ConnectionOptions& options) {
  if (absl::Status st = CheckConnectionOptions(options); !st.ok()) return st;
  std::string token;
  if (!options.token_file.empty()) {
    absl::StatusOr<std::string> read = ReadTokenFile(options.token_file);
    if (!read.ok()) return read.status();
    token = *std::move(read);
  }
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (!options.tls_ca.empty()) {
    absl::StatusOr<grpc::SslCredentialsOptions> ssl = ReadTlsFiles(options);
    if (!ssl.ok()) return ssl.status();
    creds = grpc::SslCredentials(*ssl);
  }
  return Connection(NewChannel(options, creds), std::move(token));
}

std::chrono::system_clock::time_point DeadlineAfter(int timeout_ms) {
  return std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms);
}

absl::Status FromGrpc(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

absl::StatusOr<v1::ModelMetadataResponse> FetchModelMetadata(const InferenceClient& client,
                                                             const ModelTarget& target) {
  v1::ModelMetadataRequest request;
  request.set_model_name(target.model);
  request.set_model_version(target.version);
  const absl::StatusOr<v1::ModelMetadataResponse> response =
      Call(client, &v1::Inference::Stub::GetModelMetadata, request, 10000);
  if (!response.ok()) return response.status();
  if (!response->ready()) {
    return absl::UnavailableError("model '" + response->name() + "' version '" +
                                  response->version() + "' is not ready");
  }
  return *response;
}

absl::StatusOr<v1::PredictResponse> CallPredict(const InferenceClient& client,
                                                const v1::PredictRequest& request, int timeout_ms) {
  return Call(client, &v1::Inference::Stub::Predict, request, timeout_ms);
}

absl::StatusOr<v1::ExplainResponse> CallExplain(const InferenceClient& client,
                                                const v1::ExplainRequest& request, int timeout_ms) {
  return Call(client, &v1::Inference::Stub::Explain, request, timeout_ms);
}

}  // namespace gatescope::client
