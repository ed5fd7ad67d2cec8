// TLS and mutual TLS on loopback with certificates the test makes itself (openssl CLI): a TLS
// server refuses plaintext, a mutual-TLS server refuses clients without a certificate from its
// CA, the SDK completes a round over mutual TLS, and a known identity presented with a different
// client certificate is refused.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/config.h"
#include "common/sha256.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_certificates.h"
#include "tests/client/sdk/sdk_test_util.h"
#include "tests/server/service/grpc_test_harness.h"

namespace fedsched {
namespace {

using ::fedsched::testing::ClientRunner;
using ::fedsched::testing::PatternModel;
using ::fedsched::testing::RegisterRaw;
using ::fedsched::testing::StatusIs;
using ::fedsched::testing::TestServer;
using ::testing::HasSubstr;

using Certificates = ::fedsched::testing::TestCertificates;

// The SHA-256 fingerprint openssl prints for `pem_path`, as raw bytes.
std::string OpensslFingerprint(const std::string& pem_path) {
  const std::string out_path = pem_path + ".fp";
  if (std::system(absl::StrCat("openssl x509 -in '", pem_path, "' -noout -fingerprint -sha256 > '",
                               out_path, "'")
                      .c_str()) != 0) {
    return "";
  }
  absl::StatusOr<std::string> text = ReadFileToString(out_path);
  if (!text.ok()) return "";
  std::string hex = std::string(absl::StripAsciiWhitespace(text->substr(text->find('=') + 1)));
  hex = absl::AsciiStrToLower(absl::StrReplaceAll(hex, {{":", ""}}));
  std::string raw;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    raw.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return raw;
}

v1::TransportConfig ClientTransport(const std::string& cert) {
  v1::TransportConfig t;
  t.set_tls_ca_path(Certificates::Path("ca.pem"));
  if (!cert.empty()) {
    t.set_tls_cert_path(Certificates::Path(cert + ".pem"));
    t.set_tls_key_path(Certificates::Path(cert + ".key"));
  }
  return t;
}

// A stub whose channel uses `transport` (resolved) against `server`.
std::unique_ptr<v1::Coordinator::Stub> Stub(const TestServer& server,
                                            const v1::TransportConfig& transport) {
  absl::StatusOr<v1::TransportConfig> resolved = ResolveTransport(transport);
  EXPECT_OK(resolved);
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      MakeChannelCredentials(*resolved);
  EXPECT_OK(credentials);
  return server.NewStub(*credentials);
}

TestServer::Options ServerOptions(bool mutual) {
  TestServer::Options options;
  options.config.set_clients_per_round(1);
  options.config.set_min_updates(1);
  options.config.set_min_online_clients(1);
  options.config.set_num_rounds(1);
  options.config.set_heartbeat_interval_ms(100);
  options.config.mutable_training()->set_local_steps(1);
  options.config.mutable_training()->set_batch_size(1);
  v1::TransportConfig* t = options.config.mutable_transport();
  t->set_tls_cert_path(Certificates::Path("server.pem"));
  t->set_tls_key_path(Certificates::Path("server.key"));
  if (mutual) {
    t->set_tls_ca_path(Certificates::Path("ca.pem"));
    t->set_require_client_cert(true);
  }
  options.initial_model = PatternModel({100});
  options.tick_thread = true;
  return options;
}

TEST(TlsTest, TlsServerServesTlsClientsAndRefusesPlaintext) {
  ASSERT_OK_AND_ASSIGN(auto server, TestServer::Start(ServerOptions(/*mutual=*/false)));
  // Plaintext against a TLS port: the handshake never completes.
  EXPECT_THAT(RegisterRaw(*server->NewStub(), "plain"),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("")));
  // TLS with the CA: a whole round with the SDK.
  v1::ClientConfig config;
  config.set_server_address(server->address());
  config.set_identity("tls-device");
  *config.mutable_transport() = ClientTransport("");
  ASSERT_OK_AND_ASSIGN(auto client, ClientRunner::Start(config));
  ASSERT_TRUE(TestServer::WaitFor([&] { return client->done(); }));
  EXPECT_OK(client->result());
  EXPECT_EQ(client->client().stats().tasks_completed, 1);
  // Commits are asynchronous to the upload that closed the round: wait for it.
  ASSERT_TRUE(TestServer::WaitFor([&] { return server->coordinator().committed_round() >= 1; }));
  EXPECT_EQ(server->coordinator().committed_round(), 1);
  // The register response never carries the server's certificate paths.
  ASSERT_OK_AND_ASSIGN(auto session, RegisterRaw(*Stub(*server, ClientTransport("")), "x"));
  EXPECT_FALSE(session.client_id.empty());
}

TEST(TlsTest, MutualTlsRefusesClientsWithoutACertificateFromItsCa) {
  ASSERT_OK_AND_ASSIGN(auto server, TestServer::Start(ServerOptions(/*mutual=*/true)));
  EXPECT_THAT(RegisterRaw(*server->NewStub(), "plain"),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("")));
  EXPECT_THAT(RegisterRaw(*Stub(*server, ClientTransport("")), "no-cert"),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("")));
  EXPECT_THAT(RegisterRaw(*Stub(*server, ClientTransport("rogue_client")), "rogue"),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("")));
  EXPECT_EQ(server->coordinator().GetStatus(1).registered_clients(), 0);
  // A client with a certificate from the CA runs a whole round through the SDK.
  v1::ClientConfig config;
  config.set_server_address(server->address());
  config.set_identity("client_a");  // under mTLS the identity is the certificate's CN or SAN
  *config.mutable_transport() = ClientTransport("client_a");
  ASSERT_OK_AND_ASSIGN(auto client, ClientRunner::Start(config));
  ASSERT_TRUE(TestServer::WaitFor([&] { return client->done(); }));
  EXPECT_OK(client->result());
  EXPECT_EQ(client->client().stats().tasks_completed, 1);
  // Commits are asynchronous to the upload that closed the round: wait for it.
  ASSERT_TRUE(TestServer::WaitFor([&] { return server->coordinator().committed_round() >= 1; }));
  EXPECT_EQ(server->coordinator().committed_round(), 1);
}

TEST(TlsTest, FingerprintMatchesOpenssl) {
  for (const char* name : {"client_a.pem", "client_b.pem", "server.pem"}) {
    ASSERT_OK_AND_ASSIGN(std::string pem, ReadFileToString(Certificates::Path(name)));
    ASSERT_OK_AND_ASSIGN(std::string mine, CertificateFingerprint(pem));
    EXPECT_EQ(ToHex(mine), ToHex(OpensslFingerprint(Certificates::Path(name)))) << name;
  }
}

TEST(TlsTest, KnownIdentityWithADifferentCertificateIsRefused) {
  ASSERT_OK_AND_ASSIGN(auto server, TestServer::Start(ServerOptions(/*mutual=*/true)));
  auto as_a = Stub(*server, ClientTransport("client_a"));
  auto as_b = Stub(*server, ClientTransport("client_b"));
  ASSERT_OK_AND_ASSIGN(auto first, RegisterRaw(*as_a, "client_a"));
  // Another certificate cannot claim the identity, nor a certificate another name.
  EXPECT_THAT(RegisterRaw(*as_b, "client_a"),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("not a name of the client certificate")));
  EXPECT_THAT(RegisterRaw(*as_a, "device-a"),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("not a name of the client certificate")));
  // The rightful owner keeps its identity; another identity may use the other certificate.
  ASSERT_OK_AND_ASSIGN(auto again, RegisterRaw(*as_a, "client_a"));
  EXPECT_EQ(again.client_id, first.client_id);
  ASSERT_OK(RegisterRaw(*as_b, "client_b").status());
  // The server recorded the certificate's fingerprint with the profile.
  ASSERT_OK_AND_ASSIGN(std::string pem, ReadFileToString(Certificates::Path("client_a.pem")));
  ASSERT_OK_AND_ASSIGN(std::string fingerprint, CertificateFingerprint(pem));
  const v1::GetStatusResponse status = server->coordinator().GetStatus(1);
  bool found = false;
  for (const v1::ClientSummary& c : status.clients()) {
    if (c.client_id() != first.client_id) continue;
    found = true;
    EXPECT_EQ(ToHex(c.profile().cert_fingerprint()), ToHex(fingerprint));
  }
  EXPECT_TRUE(found);
}

// A session token is bound to the certificate that registered it; the same token
// from another certificate (a leaked token) is UNAUTHENTICATED on every session RPC.
TEST(TlsTest, SessionTokenIsBoundToTheRegisteringCertificate) {
  ASSERT_OK_AND_ASSIGN(auto server, TestServer::Start(ServerOptions(/*mutual=*/true)));
  auto as_a = Stub(*server, ClientTransport("client_a"));
  auto as_b = Stub(*server, ClientTransport("client_b"));
  ASSERT_OK_AND_ASSIGN(testing::Session alice, RegisterRaw(*as_a, "client_a"));
  EXPECT_OK(testing::HeartbeatRaw(*as_a, alice));
  EXPECT_THAT(testing::HeartbeatRaw(*as_b, alice),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("another TLS client")));
  EXPECT_THAT(testing::PollRaw(*as_b, alice),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("another TLS client")));
  v1::ReportFailureRequest failure;
  failure.set_client_id(alice.client_id);
  failure.set_session_token(alice.token);
  failure.set_task_id("any");
  v1::ReportFailureResponse ignored;
  grpc::ClientContext context;
  EXPECT_THAT(testing::FromGrpc(as_b->ReportFailure(&context, failure, &ignored)),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("another TLS client")));
  // The token still works from its own certificate.
  EXPECT_OK(testing::PollRaw(*as_a, alice).status());
}

// fedsched-status talks to a mutual-TLS server (--ca, --cert, --key) with
// the operator token, and gets nothing without TLS or without the token.
TEST(TlsTest, StatusToolSpeaksMutualTlsWithTheOperatorToken) {
  TestServer::Options options = ServerOptions(/*mutual=*/true);
  options.operator_token = "operator-token-for-the-tls-test-0123";
  ASSERT_OK_AND_ASSIGN(auto server, TestServer::Start(std::move(options)));
  ASSERT_OK(RegisterRaw(*Stub(*server, ClientTransport("client_a")), "client_a").status());
  const std::string token_file = Certificates::Path("operator_token");
  ASSERT_OK(WriteFileAtomically(token_file, "operator-token-for-the-tls-test-0123"));
  const char* dir = std::getenv("FEDSCHED_BINARY_DIR");
  const std::string status = absl::StrCat(dir != nullptr ? dir : ".", "/server/fedsched-status",
                                          " --server=", server->address());
  const std::string tls = absl::StrCat(" --ca=", Certificates::Path("ca.pem"),
                                       " --cert=", Certificates::Path("client_a.pem"),
                                       " --key=", Certificates::Path("client_a.key"));
  const std::string out = Certificates::Path("status.out");
  auto run = [&](const std::string& args) {
    return std::system(absl::StrCat(status, args, " > '", out, "' 2>&1").c_str());
  };
  EXPECT_EQ(run(tls + " --token_file=" + token_file), 0);
  absl::StatusOr<std::string> shown = ReadFileToString(out);
  ASSERT_OK(shown);
  EXPECT_THAT(*shown, HasSubstr("clients 1 registered"));
  EXPECT_NE(run(tls), 0);                            // no operator token
  EXPECT_NE(run(" --token_file=" + token_file), 0);  // plaintext against the TLS port
}

}  // namespace
}  // namespace fedsched

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new fedsched::Certificates());
  return RUN_ALL_TESTS();
}
