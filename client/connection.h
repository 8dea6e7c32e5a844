// Channels, deadlines and metadata shared by gatescope-client's commands and gatescope-perf.
// Every call here blocks.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/options.h"
#include "gatescope/v1/inference.grpc.pb.h"

namespace gatescope::client {

// An open connection to the server: its channel and the bearer token every call carries.
// Cheap to copy (the channel is shared). Thread-safe: the channel may be used by many
// threads at once and nothing here changes after construction.
class Connection {
 public:
  // `token` empty: calls carry no authorization metadata.
  Connection(std::shared_ptr<grpc::Channel> channel, std::string token);

  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  const std::string& token() const { return token_; }

  // A context for one call (gRPC contexts are single-use): deadline `timeout_ms` from now
  // and, with a token, `authorization: Bearer <token>` metadata. Added per call rather
  // than as call credentials, which gRPC drops on insecure (e.g. loopback) channels.
  std::unique_ptr<grpc::ClientContext> NewContext(int timeout_ms) const;

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::string token_;
};

// Checks `options` (no file read): INVALID_ARGUMENT naming the flag when --tls-cert comes
// without --tls-key (or the reverse), or --tls-cert, --tls-key or --tls-server-name without
// --tls-ca.
absl::Status CheckConnectionOptions(const ConnectionOptions& options);

// The PEM contents of the TLS files of `options` (gRPC's struct for them, also read by
// gatescope-perf's HTTPS client); an empty field for a flag not given. INVALID_ARGUMENT
// naming the flag when a file cannot be read or is not PEM.
absl::StatusOr<grpc::SslCredentialsOptions> ReadTlsFiles(const ConnectionOptions& options);

// The bearer token in `path`: its first non-empty line, surrounding whitespace trimmed;
// lines starting with '#' are skipped as comments, as in the server's token files.
// INVALID_ARGUMENT (naming the file) when it cannot be read, holds no token, or the token
// has a character a header value cannot carry (only visible ASCII is taken).
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// The metadata pair that carries `token`: {"authorization", "Bearer <token>"}.
std::pair<std::string, std::string> AuthorizationMetadata(const std::string& token);

// Checks `options` and reads its files: a channel to options.server that takes large
// explanations (TLS when options.tls_ca is set, else insecure) and the token. Connects
// lazily, so an unreachable server shows at the first call. INVALID_ARGUMENT with a one-line
// reason when the options do not fit together or a file cannot be read or is not PEM.
absl::StatusOr<Connection> OpenConnection(const ConnectionOptions& options);

// The deadline `timeout_ms` from now.
std::chrono::system_clock::time_point DeadlineAfter(int timeout_ms);

// The same code and message as an absl::Status (the code numbers agree).
absl::Status FromGrpc(const grpc::Status& status);

// gatescope.v1 calls over a Connection. Thread-safe like the gRPC stub it holds.
struct InferenceClient {
  explicit InferenceClient(Connection c)
      : connection(std::move(c)), stub(v1::Inference::NewStub(connection.channel())) {}

  Connection connection;
  std::unique_ptr<v1::Inference::Stub> stub;
};

// `target`'s metadata from GetModelMetadata (10 s deadline): the version that answers and
// the model's config. The server's error when the call fails; UNAVAILABLE when the model
// is known but not ready (it failed to load, or is loading), since its metadata then
// cannot be trusted.
absl::StatusOr<v1::ModelMetadataResponse> FetchModelMetadata(const InferenceClient& client,
                                                 const ModelTarget& target);

// Predict and Explain with a deadline `timeout_ms` from now; the server's error (or the
// deadline's) when the call fails.
absl::StatusOr<v1::PredictResponse> CallPredict(const InferenceClient& client,
                                                const v1::PredictRequest& request, int timeout_ms);
absl::StatusOr<v1::ExplainResponse> CallExplain(const InferenceClient& client,
                                                const v1::ExplainRequest& request, int timeout_ms);

}  // namespace gatescope::client
