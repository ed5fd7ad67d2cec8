// The output of Provision (server/provision/provision.h): every kit's files with the names and
// modes the server and the SDK expect, certificates with the right names, enrolment secrets the
// server's key derives, configs the server accepts, Kubernetes Secrets matching the kit, and an
// output folder that is never overwritten by accident.
#include "server/provision/provision.h"

#include <sys/stat.h>

#include <filesystem>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "common/testing/status_matchers.h"
#include "common/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/provision/pki.h"
#include "server/service/credentials.h"
#include "server/service/server_config.h"

namespace fedsched::provision {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

// A StatusOr that is OK and holds `expected`.
MATCHER_P(HoldsValue, expected, "is OK and holds " + ::testing::PrintToString(expected)) {
  if (!arg.ok()) *result_listener << "status: " << arg.status();
  return arg.ok() && *arg == expected;
}

class ProvisionTest : public ::fedsched::testing::TempDirTest {
 protected:
  ProvisionOptions Options() {
    ProvisionOptions o;
    o.out_dir = Path("out");
    o.server_names = {"127.0.0.1", "fl.example.com"};
    o.port = 40000;
    o.devices = {"device-001", "device-002"};
    o.validity_days = 30;
    return o;
  }
  std::string Read(const std::string& relative) {
    absl::StatusOr<std::string> text = ReadFileToString(Path("out/" + relative));
    EXPECT_OK(text) << relative;
    return text.ok() ? *text : "";
  }
  mode_t Mode(const std::string& relative) {
    struct stat st;
    EXPECT_EQ(::lstat(Path("out/" + relative).c_str(), &st), 0) << relative;
    return st.st_mode & 07777;
  }
};

TEST_F(ProvisionTest, FlatKitsHoldWhatServerAndDevicesExpectWithPrivateModes) {
  ASSERT_OK_AND_ASSIGN(ProvisionResult result, Provision(Options()));
  EXPECT_THAT(result.kits, ::testing::ElementsAre("server", "operator", "devices/device-001",
                                                  "devices/device-002"));
  const std::string ca = Read("ca/ca.crt");
  // The server's certificate: names it is dialled by, a TLS server's usage.
  const std::string server_cert = Read("server/tls/tls.crt");
  EXPECT_OK(VerifyCertificate(ca, server_cert, Usage::kServer));
  for (const char* name : {"127.0.0.1", "fl.example.com"}) {
    EXPECT_THAT(CertificateMatchesName(server_cert, name), HoldsValue(true)) << name;
  }
  EXPECT_EQ(Read("server/tls/ca.crt"), ca);
  // Each device: a client certificate named by its identity, its identity and the secret the
  // server's enrolment key derives, in a private state dir.
  const std::string key(absl::StripTrailingAsciiWhitespace(Read("server/secrets/enrolment.key")));
  EXPECT_EQ(key.size(), 64u);
  for (const std::string id : {"device-001", "device-002"}) {
    const std::string kit = "devices/" + id + "/";
    const std::string cert = Read(kit + "tls/tls.crt");
    EXPECT_OK(VerifyCertificate(ca, cert, Usage::kClient));
    EXPECT_THAT(CertificateCommonName(cert), HoldsValue(id));
    EXPECT_EQ(Read(kit + "state/identity"), id + "\n");
    EXPECT_EQ(Read(kit + "state/credential"), EnrolmentSecret(key, id) + "\n");
    EXPECT_EQ(Mode(kit + "state"), 0700);
    for (const char* f : {"tls/tls.key", "state/identity", "state/credential"}) {
      EXPECT_EQ(Mode(kit + f), 0600) << kit << f;
    }
    EXPECT_EQ(Mode(kit + "start.sh"), 0755);
    v1::ClientConfig client;
    ASSERT_OK(LoadTextConfig(Path("out/" + kit + "client.textproto"), &client));
    EXPECT_EQ(client.server_address(), "127.0.0.1:40000");
    EXPECT_EQ(client.identity(), id);
    EXPECT_EQ(client.state_dir(), "state");
    EXPECT_EQ(client.transport().tls_ca_path(), "tls/ca.crt");
    EXPECT_EQ(client.transport().tls_cert_path(), "tls/tls.crt");
    EXPECT_EQ(client.data().num_partitions(), 2);
  }
  for (const char* f : {"ca/ca.key", "server/tls/tls.key", "server/secrets/enrolment.key",
                        "server/secrets/operator.token", "operator/secrets/operator.token",
                        "operator/tls/tls.key", "k8s/secrets.yaml"}) {
    EXPECT_EQ(Mode(f), 0600) << f;
  }
  for (const char* d : {"", "ca", "server", "server/secrets", "server/tls", "k8s"}) {
    EXPECT_EQ(Mode(d), 0700) << d;
  }
  // The server's config: mutual TLS and the enrolment key, paths inside its kit, accepted.
  v1::ServerConfig server;
  ASSERT_OK(LoadTextConfig(Path("out/server/server.textproto"), &server));
  EXPECT_EQ(server.listen_address(), "0.0.0.0:40000");
  EXPECT_TRUE(server.transport().require_client_cert());
  EXPECT_EQ(server.security().enrolment_key_path(), "secrets/enrolment.key");
  EXPECT_EQ(server.security().operator_token_path(), "secrets/operator.token");
  EXPECT_OK(ResolveServerConfig(server).status());
  // The operator's client certificate and token for fedsched-status.
  EXPECT_OK(VerifyCertificate(ca, Read("operator/tls/tls.crt"), Usage::kClient));
  EXPECT_EQ(Read("operator/secrets/operator.token"), Read("server/secrets/operator.token"));
  EXPECT_THAT(Read("operator/status.sh"), HasSubstr("--server=127.0.0.1:40000"));
  EXPECT_THAT(Read("README.txt"), ::testing::StartsWith("fedsched-provision output"));
}

TEST_F(ProvisionTest, KubernetesSecretsCarryTheServersFilesUnderDeployK8sNames) {
  ProvisionOptions o = Options();
  o.k8s_namespace = "fl";
  ASSERT_OK(Provision(o).status());
  const std::string yaml = Read("k8s/secrets.yaml");
  for (const char* name : {"name: fedsched-tls", "name: fedsched-enrolment",
                           "name: fedsched-operator", "namespace: fl"}) {
    EXPECT_THAT(yaml, HasSubstr(name));
  }
  const auto entry = [&](const std::string& key, const std::string& file) {
    return absl::StrCat("  ", key, ": ", absl::Base64Escape(Read(file)), "\n");
  };
  EXPECT_THAT(yaml, HasSubstr(entry("tls.crt", "server/tls/tls.crt")));
  EXPECT_THAT(yaml, HasSubstr(entry("tls.key", "server/tls/tls.key")));
  EXPECT_THAT(yaml, HasSubstr(entry("ca.crt", "server/tls/ca.crt")));
  EXPECT_THAT(yaml, HasSubstr(entry("key", "server/secrets/enrolment.key")));
  EXPECT_THAT(yaml, HasSubstr(entry("token", "server/secrets/operator.token")));
}

TEST_F(ProvisionTest, HierarchyGivesAggregatorsTokensCertificatesAndDevicesFallbacks) {
  ProvisionOptions o = Options();
  o.aggregators = {{"agg-1", "127.0.0.1", 0}, {"agg-2", "agg-2.example.com", 41000}};
  ASSERT_OK(Provision(o).status());
  const std::string ca = Read("ca/ca.crt");
  v1::ServerConfig root;
  ASSERT_OK(LoadTextConfig(Path("out/server/server.textproto"), &root));
  EXPECT_EQ(root.hierarchy().role(), v1::HierarchyConfig::ROLE_ROOT);
  EXPECT_EQ(root.hierarchy().aggregator_token_dir(), "aggregator_tokens");
  EXPECT_FALSE(root.transport().require_client_cert());  // relayed devices carry no certificate
  for (const std::string id : {"agg-1", "agg-2"}) {
    const std::string kit = "aggregators/" + id + "/";
    EXPECT_EQ(Read(kit + "secrets/upstream.token"), Read("server/aggregator_tokens/" + id));
    EXPECT_EQ(Mode("server/aggregator_tokens/" + id), 0600);
    const std::string cert = Read(kit + "tls/tls.crt");
    EXPECT_OK(VerifyCertificate(ca, cert, Usage::kServerClient));
    EXPECT_THAT(CertificateCommonName(cert), HoldsValue(id));
    v1::ServerConfig agg;
    ASSERT_OK(LoadTextConfig(Path("out/" + kit + "aggregator.textproto"), &agg));
    EXPECT_EQ(agg.hierarchy().role(), v1::HierarchyConfig::ROLE_AGGREGATOR);
    EXPECT_EQ(agg.hierarchy().aggregator_id(), id);
    EXPECT_EQ(agg.hierarchy().upstream_address(), "127.0.0.1:40000");
    EXPECT_TRUE(agg.transport().require_client_cert());
    EXPECT_OK(ResolveServerConfig(agg).status());
  }
  EXPECT_THAT(CertificateMatchesName(Read("aggregators/agg-2/tls/tls.crt"), "agg-2.example.com"),
              HoldsValue(true));
  v1::ClientConfig second;
  ASSERT_OK(LoadTextConfig(Path("out/devices/device-002/client.textproto"), &second));
  EXPECT_EQ(second.server_address(), "agg-2.example.com:41000");
  EXPECT_THAT(second.fallback_addresses(),
              ::testing::ElementsAre("127.0.0.1:40001", "127.0.0.1:40000"));
}

TEST_F(ProvisionTest, EnrolmentKeyOnlyGivesDevicesNoCertificate) {
  ProvisionOptions o = Options();
  o.device_auth = DeviceAuth::kEnrolmentKey;
  ASSERT_OK(Provision(o).status());
  EXPECT_FALSE(std::filesystem::exists(Path("out/devices/device-001/tls/tls.crt")));
  EXPECT_FALSE(std::filesystem::exists(Path("out/operator/tls/tls.crt")));
  v1::ServerConfig server;
  ASSERT_OK(LoadTextConfig(Path("out/server/server.textproto"), &server));
  EXPECT_FALSE(server.transport().require_client_cert());
  EXPECT_TRUE(server.transport().tls_ca_path().empty());
}

TEST_F(ProvisionTest, ServerDirMakesTheServersPathsAbsolute) {
  ProvisionOptions o = Options();
  o.server_dir = "/etc/fedsched/";
  o.aggregators = {{"agg-1", "127.0.0.1", 0}};
  ASSERT_OK(Provision(o).status());
  v1::ServerConfig server;
  ASSERT_OK(LoadTextConfig(Path("out/server/server.textproto"), &server));
  EXPECT_EQ(server.transport().tls_cert_path(), "/etc/fedsched/tls/tls.crt");
  EXPECT_EQ(server.transport().tls_key_path(), "/etc/fedsched/tls/tls.key");
  EXPECT_EQ(server.security().enrolment_key_path(), "/etc/fedsched/secrets/enrolment.key");
  EXPECT_EQ(server.security().operator_token_path(), "/etc/fedsched/secrets/operator.token");
  EXPECT_EQ(server.hierarchy().aggregator_token_dir(), "/etc/fedsched/aggregator_tokens");
  o.server_dir = "etc/fedsched";
  o.out_dir = Path("out2");
  EXPECT_THAT(Provision(o), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("absolute")));
}

TEST_F(ProvisionTest, ReuseKeepsTheCaAndSecretsSoDeployedKitsKeepWorking) {
  ProvisionOptions o = Options();
  o.aggregators = {{"agg-1", "127.0.0.1", 0}};
  ASSERT_OK(Provision(o).status());
  const std::string ca = Read("ca/ca.crt");
  const std::string key = Read("server/secrets/enrolment.key");
  const std::string token = Read("server/secrets/operator.token");
  const std::string agg_token = Read("server/aggregator_tokens/agg-1");
  const std::string credential = Read("devices/device-001/state/credential");
  // Renewed in place, with one more device and one more aggregator.
  o.reuse_dir = Path("out");
  o.force = true;
  o.devices.push_back("device-003");
  o.aggregators.push_back({"agg-2", "127.0.0.1", 0});
  ASSERT_OK(Provision(o).status());
  EXPECT_EQ(Read("ca/ca.crt"), ca);
  EXPECT_EQ(Read("server/secrets/enrolment.key"), key);
  EXPECT_EQ(Read("server/secrets/operator.token"), token);
  EXPECT_EQ(Read("server/aggregator_tokens/agg-1"), agg_token);
  EXPECT_NE(Read("server/aggregator_tokens/agg-2"), agg_token);
  EXPECT_EQ(Read("devices/device-001/state/credential"), credential);
  EXPECT_OK(VerifyCertificate(ca, Read("devices/device-003/tls/tls.crt"), Usage::kClient));
  // A reuse folder without a CA, or with its key open to others, is refused naming the file.
  o.reuse_dir = Path("nowhere");
  EXPECT_THAT(Provision(o), StatusIs(absl::StatusCode::kNotFound, HasSubstr("ca.crt")));
  ASSERT_EQ(::chmod(Path("out/ca/ca.key").c_str(), 0644), 0);
  o.reuse_dir = Path("out");
  o.out_dir = Path("out2");
  o.force = false;
  EXPECT_THAT(Provision(o), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("ca.key")));
}

TEST_F(ProvisionTest, AnExistingFolderIsReplacedOnlyWithForceAndOnlyIfItIsAnOutput) {
  ASSERT_OK(Provision(Options()).status());
  const std::string first_key = Read("ca/ca.key");
  EXPECT_THAT(Provision(Options()),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("--force")));
  EXPECT_EQ(Read("ca/ca.key"), first_key);
  ProvisionOptions forced = Options();
  forced.force = true;
  ASSERT_OK(Provision(forced).status());
  EXPECT_NE(Read("ca/ca.key"), first_key);
  // A folder that is not an output of the tool is never replaced.
  std::filesystem::create_directories(Path("home"));
  Write("home/notes.txt", "mine", 0644);
  forced.out_dir = Path("home");
  EXPECT_THAT(Provision(forced), StatusIs(absl::StatusCode::kFailedPrecondition,
                                          HasSubstr("not an output of fedsched-provision")));
  EXPECT_TRUE(std::filesystem::exists(Path("home/notes.txt")));
  // Nothing is left behind by a refused run, and no temporary folder by any run.
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    EXPECT_THAT(entry.path().filename().string(), ::testing::Not(HasSubstr(".tmp-")));
  }
}

TEST_F(ProvisionTest, BadOptionsAreRefusedNamingThem) {
  ProvisionOptions o = Options();
  o.devices.clear();
  EXPECT_THAT(Provision(o), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no devices")));
  o = Options();
  o.devices.push_back("device-001");
  EXPECT_THAT(Provision(o), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("twice")));
  o = Options();
  o.devices = {"a/b"};
  EXPECT_THAT(Provision(o), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("a/b")));
  o = Options();
  o.server_names = {"not a name"};
  EXPECT_THAT(Provision(o), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a name")));
  o = Options();
  o.device_auth = DeviceAuth::kCertificate;
  o.aggregators = {{"agg-1", "", 0}};
  EXPECT_THAT(Provision(o), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("aggregators")));
  o = Options();
  o.aggregators = {{"agg-1", "127.0.0.1", 40000}};
  EXPECT_THAT(Provision(o), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("used twice")));
  EXPECT_FALSE(std::filesystem::exists(Path("out")));
}

TEST(ProvisionParseTest, AggregatorSpecsAndDeviceAuth) {
  ASSERT_OK_AND_ASSIGN(AggregatorSpec a, ParseAggregatorSpec("agg-1"));
  EXPECT_EQ(a.id, "agg-1");
  EXPECT_EQ(a.host, "");
  ASSERT_OK_AND_ASSIGN(AggregatorSpec b, ParseAggregatorSpec("agg-2=agg.example.com:50061"));
  EXPECT_EQ(b.host, "agg.example.com");
  EXPECT_EQ(b.port, 50061);
  EXPECT_FALSE(ParseAggregatorSpec("agg=host:x").ok());
  EXPECT_FALSE(ParseAggregatorSpec("=host").ok());
  EXPECT_THAT(ParseDeviceAuth("certificate_and_key"), HoldsValue(DeviceAuth::kCertificateAndKey));
  EXPECT_THAT(ParseDeviceAuth("tofu"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("certificate_and_key")));
}

}  // namespace
}  // namespace fedsched::provision
