// JobService under mutual TLS: a client certificate listed in operator_cert_sha256 acts as an
// operator without the token; another certificate from the same CA needs the token; a wrong
// token is refused even from an operator's certificate.
#include <memory>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "common/config.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_certificates.h"
#include "common/transport.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/jobservice/job_service_harness.h"

namespace fedsched {
namespace {

using ::fedsched::testing::FakeJobControl;
using ::fedsched::testing::JobServiceServer;
using ::fedsched::testing::TestCertificates;

constexpr char kToken[] = "operator-secret";

std::shared_ptr<grpc::ServerCredentials> MutualTlsServer() {
  v1::TransportConfig t;
  t.set_tls_cert_path(TestCertificates::Path("server.pem"));
  t.set_tls_key_path(TestCertificates::Path("server.key"));
  t.set_tls_ca_path(TestCertificates::Path("ca.pem"));
  t.set_require_client_cert(true);
  absl::StatusOr<v1::TransportConfig> resolved = ResolveTransport(t);
  EXPECT_OK(resolved);
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      MakeServerCredentials(*resolved);
  EXPECT_OK(credentials);
  return *credentials;
}

std::shared_ptr<grpc::ChannelCredentials> Client(const std::string& cert) {
  v1::TransportConfig t;
  t.set_tls_ca_path(TestCertificates::Path("ca.pem"));
  t.set_tls_cert_path(TestCertificates::Path(cert + ".pem"));
  t.set_tls_key_path(TestCertificates::Path(cert + ".key"));
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials = MakeChannelCredentials(t);
  EXPECT_OK(credentials);
  return *credentials;
}

// The hex SHA-256 of a certificate file, upper case with ':' as openssl prints it.
std::string OpensslStyleFingerprint(const std::string& cert) {
  absl::StatusOr<std::string> pem = ReadFileToString(TestCertificates::Path(cert + ".pem"));
  EXPECT_OK(pem);
  absl::StatusOr<std::string> raw = CertificateFingerprint(*pem);
  EXPECT_OK(raw);
  std::string hex = absl::AsciiStrToUpper(absl::BytesToHexString(*raw));
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    if (i > 0) out += ':';
    out += hex.substr(i, 2);
  }
  return out;
}

grpc::StatusCode ListAs(const JobServiceServer& server, const std::string& cert,
                        const std::string& token) {
  auto stub = v1::JobService::NewStub(server.Channel(Client(cert)));
  grpc::ClientContext context;
  if (!token.empty()) context.AddMetadata("fedsched-operator-token", token);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::ListJobsResponse response;
  return stub->ListJobs(&context, {}, &response).error_code();
}

TEST(JobServiceTlsTest, AnOperatorCertificateStandsForTheToken) {
  FakeJobControl control;
  v1::JobsConfig jobs;
  jobs.add_operator_cert_sha256(OpensslStyleFingerprint("client_a"));
  JobServiceOptions options = JobServiceOptionsFor(jobs, kToken);
  JobServiceServer server(&control, options, MutualTlsServer());
  EXPECT_EQ(ListAs(server, "client_a", ""), grpc::StatusCode::OK);
  EXPECT_EQ(ListAs(server, "client_b", ""), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(ListAs(server, "client_b", kToken), grpc::StatusCode::OK);
  EXPECT_EQ(ListAs(server, "client_a", "wrong"), grpc::StatusCode::UNAUTHENTICATED);
}

}  // namespace
}  // namespace fedsched

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new fedsched::testing::TestCertificates());
  return RUN_ALL_TESTS();
}
