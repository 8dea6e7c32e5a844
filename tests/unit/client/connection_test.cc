// The client's connection: token files, flag combinations, and the authorization metadata
// and TLS settings that reach an in-process gatescope.v1 server (insecure, TLS, mutual TLS).
#include "client/connection.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/test/client_context_test_peer.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <vector>

#include "tests/unit/client/test_certs.h"

namespace gatescope::client {
namespace {
namespace fs = std::filesystem;

// A fresh directory for the test's files, removed afterwards.
class TempDir {
 public:
  TempDir()
      : path_(fs::temp_directory_path() / ("gatescope_connection_" + std::to_string(getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }

  // Writes `text` to `name` in the directory; returns its path.
  std::string Write(const std::string& name, const std::string& text) const {
    const fs::path path = path_ / name;
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
  }
  std::string Path(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

TEST(ReadTokenFileTest, TakesTheFirstNonEmptyLineTrimmed) {
  TempDir dir;
  EXPECT_EQ(*ReadTokenFile(dir.Write("a", "  \n\t \r\n  tok-123.A_b~+/=  \r\nsecond\n")),
            "tok-123.A_b~+/=");
  EXPECT_EQ(*ReadTokenFile(dir.Write("b", "abc")), "abc");  // no newline
  EXPECT_EQ(*ReadTokenFile(dir.Write("c", "xyz\r\n")), "xyz");
  EXPECT_EQ(*ReadTokenFile(dir.Write("d", "# inference token\n  #x\ntok\n")), "tok");
}

TEST(ReadTokenFileTest, AnEmptyOrBlankFileIsAnError) {
  TempDir dir;
  for (const char* text : {"", "\n\n", "  \t\r\n \n", "# only a comment\n"}) {
    const absl::StatusOr<std::string> token = ReadTokenFile(dir.Write("t", text));
    ASSERT_FALSE(token.ok()) << text;
    EXPECT_EQ(token.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(token.status().message().find("holds no token"), std::string::npos)
        << token.status();
    EXPECT_NE(token.status().message().find("--token-file"), std::string::npos);
  }
}

TEST(ReadTokenFileTest, AMissingFileOrAnUnsendableTokenIsAnError) {
  TempDir dir;
  const absl::StatusOr<std::string> missing = ReadTokenFile(dir.Path("missing"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(dir.Path("missing")), std::string::npos);
  EXPECT_NE(missing.status().message().find("No such file"), std::string::npos);
  EXPECT_NE(missing.status().message().find("GATESCOPE_TOKEN_FILE"), std::string::npos);
  EXPECT_FALSE(ReadTokenFile(dir.Path("")).ok());  // the directory itself
  for (const char* text : {"two words\n", "tab\there", "caf\xc3\xa9"}) {
    const absl::StatusOr<std::string> token = ReadTokenFile(dir.Write("t", text));
    ASSERT_FALSE(token.ok()) << text;
    EXPECT_NE(token.status().message().find("non-ASCII"), std::string::npos);
  }
}

// The reason CheckConnectionOptions gives for `options`; empty when they are accepted.
std::string Reason(const ConnectionOptions& options) {
  return std::string(CheckConnectionOptions(options).message());
}

TEST(CheckConnectionOptionsTest, RefusesIncompleteTlsFlagsWithTheReason) {
  ConnectionOptions o;
  o.tls_ca = "ca.pem";
  o.tls_cert = "c.pem";
  EXPECT_EQ(Reason(o), "--tls-cert needs --tls-key");
  o.tls_cert.clear();
  o.tls_key = "k.pem";
  EXPECT_EQ(Reason(o), "--tls-key needs --tls-cert");
  o.tls_ca.clear();
  o.tls_cert = "c.pem";
  EXPECT_EQ(Reason(o), "--tls-cert and --tls-key need --tls-ca");
  EXPECT_EQ(CheckConnectionOptions(o).code(), absl::StatusCode::kInvalidArgument);
  ConnectionOptions name_only;
  name_only.tls_server_name = "host";
  EXPECT_EQ(Reason(name_only), "--tls-server-name needs --tls-ca");
}

TEST(CheckConnectionOptionsTest, AcceptsEachCompleteCombination) {
  ConnectionOptions o;
  EXPECT_TRUE(CheckConnectionOptions(o).ok());  // insecure, no token
  o.token_file = "t";
  EXPECT_TRUE(CheckConnectionOptions(o).ok());  // insecure with a token
  o.tls_ca = "ca.pem";
  EXPECT_TRUE(CheckConnectionOptions(o).ok());
  o.tls_server_name = "host";
  o.tls_cert = "c.pem";
  o.tls_key = "k.pem";
  EXPECT_TRUE(CheckConnectionOptions(o).ok());
}

TEST(OpenConnectionTest, NamesTheFlagOfAFileThatCannotBeUsed) {
  TempDir dir;
  ConnectionOptions o;
  o.tls_ca = dir.Path("missing.pem");
  absl::StatusOr<Connection> c = OpenConnection(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(), "--tls-ca '" + o.tls_ca + "': No such file or directory");

  o.tls_ca = dir.Write("ca.pem", "not a certificate");
  c = OpenConnection(o);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("--tls-ca '" + o.tls_ca + "' is not PEM"), std::string::npos);

  o.tls_ca = dir.Write("ca.pem", test_certs::kCaPem);
  o.tls_cert = dir.Write("c.pem", test_certs::kClientCertPem);
  o.tls_key = dir.Write("k.pem", test_certs::kClientCertPem);  // a certificate, not a key
  c = OpenConnection(o);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("--tls-key"), std::string::npos) << c.status();

  o.tls_key = dir.Write("k.pem", test_certs::kClientKeyPem);
  o.token_file = dir.Write("token", "\n");
  c = OpenConnection(o);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("holds no token"), std::string::npos);

  o.token_file = dir.Write("token", " secret \n");
  c = OpenConnection(o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->token(), "secret");
  EXPECT_NE(c->channel(), nullptr);
}

TEST(OpenConnectionTest, ChecksTheCombinationBeforeReadingFiles) {
  ConnectionOptions o;
  o.tls_cert = "/nonexistent/c.pem";
  const absl::StatusOr<Connection> c = OpenConnection(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "--tls-cert needs --tls-key");
}

TEST(AuthorizationMetadataTest, IsABearerHeader) {
  EXPECT_EQ(AuthorizationMetadata("abc"),
            (std::pair<std::string, std::string>("authorization", "Bearer abc")));
}

TEST(NewContextTest, CarriesTheTokenAndTheDeadline) {
  const Connection with_token(nullptr, "tok");
  const auto before = std::chrono::system_clock::now();
  const std::unique_ptr<grpc::ClientContext> ctx = with_token.NewContext(5000);
  const std::multimap<std::string, std::string> sent =
      grpc::testing::ClientContextTestPeer(ctx.get()).GetSendInitialMetadata();
  EXPECT_EQ(sent, (std::multimap<std::string, std::string>{{"authorization", "Bearer tok"}}));
  EXPECT_GE(ctx->deadline(), before + std::chrono::milliseconds(5000));
  EXPECT_LE(ctx->deadline(), std::chrono::system_clock::now() + std::chrono::milliseconds(5000));

  const Connection without_token(nullptr, "");
  const std::unique_ptr<grpc::ClientContext> plain = without_token.NewContext(1000);
  EXPECT_TRUE(grpc::testing::ClientContextTestPeer(plain.get()).GetSendInitialMetadata().empty());
}

// A gatescope.v1 server that records the authorization metadata of each call ("" when a
// call has none) and answers GetModelMetadata and Predict.
class RecordingInference final : public v1::Inference::Service {
 public:
  grpc::Status GetModelMetadata(grpc::ServerContext* ctx, const v1::ModelMetadataRequest* request,
                                v1::ModelMetadataResponse* response) override {
    Record(*ctx);
    response->set_name(request->model_name());
    response->set_ready(true);
    response->mutable_config()->set_task("image_classification");
    return grpc::Status::OK;
  }
  grpc::Status Predict(grpc::ServerContext* ctx, const v1::PredictRequest*,
                       v1::PredictResponse*) override {
    Record(*ctx);
    return grpc::Status::OK;
  }

  std::vector<std::string> seen() const {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

 private:
  void Record(const grpc::ServerContext& ctx) {
    const auto found = ctx.client_metadata().find("authorization");
    std::lock_guard<std::mutex> lock(mu_);
    seen_.push_back(found == ctx.client_metadata().end()
                        ? ""
                        : std::string(found->second.data(), found->second.size()));
  }

  mutable std::mutex mu_;
  std::vector<std::string> seen_;
};

// The service on a free loopback port with `credentials`.
class ConnectionServerTest : public ::testing::Test {
 protected:
  void Start(const std::shared_ptr<grpc::ServerCredentials>& credentials) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", credentials, &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  // TLS with the test server certificate; client certificates required when `mutual`.
  static std::shared_ptr<grpc::ServerCredentials> Tls(bool mutual) {
    grpc::SslServerCredentialsOptions ssl(
        mutual ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
               : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    ssl.pem_root_certs = test_certs::kCaPem;
    ssl.pem_key_cert_pairs.push_back({test_certs::kServerKeyPem, test_certs::kServerCertPem});
    return grpc::SslServerCredentials(ssl);
  }

  ConnectionOptions Options() const {
    ConnectionOptions o;
    o.server = "127.0.0.1:" + std::to_string(port_);
    return o;
  }

  // GetModelMetadata then Predict over `options`; the first failure, else OK.
  static absl::Status TwoCalls(const ConnectionOptions& options) {
    absl::StatusOr<Connection> connection = OpenConnection(options);
    if (!connection.ok()) return connection.status();
    const InferenceClient client(*connection);
    ModelTarget target;
    target.model = "m";
    if (absl::StatusOr<v1::ModelMetadataResponse> metadata = FetchModelMetadata(client, target);
        !metadata.ok()) {
      return metadata.status();
    }
    return CallPredict(client, v1::PredictRequest(), 5000).status();
  }

  TempDir dir_;
  RecordingInference service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

TEST_F(ConnectionServerTest, EveryCallCarriesTheTokenOverAnInsecureChannel) {
  Start(grpc::InsecureServerCredentials());
  ConnectionOptions o = Options();
  o.token_file = dir_.Write("token", "\n  s3cr3t\n");
  ASSERT_TRUE(TwoCalls(o).ok());
  EXPECT_EQ(service_.seen(), (std::vector<std::string>{"Bearer s3cr3t", "Bearer s3cr3t"}));

  o.token_file.clear();
  ASSERT_TRUE(TwoCalls(o).ok());
  EXPECT_EQ(service_.seen().back(), "");
}

TEST_F(ConnectionServerTest, TlsVerifiesTheServerUnderTheOverriddenName) {
  Start(Tls(/*mutual=*/false));
  ConnectionOptions o = Options();
  o.tls_ca = dir_.Write("ca.pem", test_certs::kCaPem);
  o.token_file = dir_.Write("token", "t1");
  o.tls_server_name = test_certs::kTestServerName;
  ASSERT_TRUE(TwoCalls(o).ok()) << TwoCalls(o);
  EXPECT_EQ(service_.seen(), (std::vector<std::string>{"Bearer t1", "Bearer t1"}));

  // The certificate names gatescope-test-server, not 127.0.0.1.
  o.tls_server_name.clear();
  EXPECT_EQ(TwoCalls(o).code(), absl::StatusCode::kUnavailable);
  // An insecure client cannot talk to a TLS server.
  o.tls_ca.clear();
  EXPECT_EQ(TwoCalls(o).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(service_.seen().size(), 2u);
}

TEST_F(ConnectionServerTest, MutualTlsSendsTheClientCertificate) {
  Start(Tls(/*mutual=*/true));
  ConnectionOptions o = Options();
  o.tls_ca = dir_.Write("ca.pem", test_certs::kCaPem);
  o.tls_server_name = test_certs::kTestServerName;
  EXPECT_EQ(TwoCalls(o).code(), absl::StatusCode::kUnavailable);  // no client certificate
  o.tls_cert = dir_.Write("client.pem", test_certs::kClientCertPem);
  o.tls_key = dir_.Write("client.key", test_certs::kClientKeyPem);
  ASSERT_TRUE(TwoCalls(o).ok()) << TwoCalls(o);
  EXPECT_EQ(service_.seen(), (std::vector<std::string>{"", ""}));
}

}  // namespace
}  // namespace gatescope::client
