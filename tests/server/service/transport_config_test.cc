// One TransportConfig sets message limits and keepalive for server and SDK: unset fields take the
// documented defaults, "-1 = unlimited" style sentinels and out-of-range values are rejected with
// an error naming the field (docs/reports/RELIABILITY.md §1).
#include <stdlib.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>

#include "common/sha256.h"
#include "common/testing/status_matchers.h"
#include "common/testing/temp_dir.h"
#include "common/transport.h"
#include "server/service/server_config.h"

namespace fedsched {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(TransportConfigTest, UnsetFieldsTakeDocumentedDefaultsNotUnlimited) {
  ASSERT_OK_AND_ASSIGN(v1::TransportConfig t, ResolveTransport(v1::TransportConfig()));
  EXPECT_EQ(t.max_message_bytes(), 16 << 20);
  EXPECT_EQ(t.chunk_bytes(), 1 << 20);
  EXPECT_EQ(t.min_ping_interval_ms(), 20000);
  EXPECT_EQ(t.keepalive_time_ms(), 30000);
  EXPECT_EQ(t.keepalive_timeout_ms(), 10000);
  // A small message limit shrinks the default chunk to fit.
  v1::TransportConfig small;
  small.set_max_message_bytes(1 << 20);
  ASSERT_OK_AND_ASSIGN(t, ResolveTransport(small));
  EXPECT_EQ(t.chunk_bytes(), 1 << 19);
  // A server minimum above the default keepalive raises the default keepalive.
  v1::TransportConfig slow_pings;
  slow_pings.set_min_ping_interval_ms(60000);
  ASSERT_OK_AND_ASSIGN(t, ResolveTransport(slow_pings));
  EXPECT_EQ(t.keepalive_time_ms(), 60000);
}

TEST(TransportConfigTest, BoundedReadsDisableTheReadChunksExperimentUnlessNamed) {
  EXPECT_EQ(ExperimentsWithBoundedReads(""), "-tcp_read_chunks");
  EXPECT_EQ(ExperimentsWithBoundedReads("event_engine_client"),
            "event_engine_client,-tcp_read_chunks");
  // An operator's own choice about the experiment, either way, is kept.
  EXPECT_EQ(ExperimentsWithBoundedReads("a, tcp_read_chunks"), "a, tcp_read_chunks");
  EXPECT_EQ(ExperimentsWithBoundedReads("-tcp_read_chunks,b"), "-tcp_read_chunks,b");
  // A name that only contains the experiment's is another experiment.
  EXPECT_EQ(ExperimentsWithBoundedReads("tcp_read_chunks2"), "tcp_read_chunks2,-tcp_read_chunks");
}

TEST(TransportConfigTest, BoundedReadsReachTheChannelArguments) {
  ASSERT_OK_AND_ASSIGN(v1::TransportConfig t, ResolveTransport(v1::TransportConfig()));
  auto max_read_chunk = [&t]() -> int {
    grpc::ChannelArguments args = ClientChannelArguments(t);
    const grpc_channel_args c = args.c_channel_args();
    for (size_t i = 0; i < c.num_args; ++i) {
      if (std::string(c.args[i].key) == GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE) {
        return c.args[i].value.integer;
      }
    }
    return 0;
  };
  BoundTcpReads(0);  // no bound: gRPC's default
  EXPECT_EQ(max_read_chunk(), 0);
  BoundTcpReads(64 << 10);
  EXPECT_EQ(max_read_chunk(), 64 << 10);
  const char* experiments = getenv("GRPC_EXPERIMENTS");
  ASSERT_NE(experiments, nullptr);
  EXPECT_THAT(std::string(experiments), HasSubstr("-tcp_read_chunks"));
}

struct BadCase {
  const char* field;
  std::function<void(v1::TransportConfig*)> edit;
};

TEST(TransportConfigTest, SentinelsAndOutOfRangeValuesAreRejectedNamingTheField) {
  const BadCase cases[] = {
      {"max_message_bytes", [](auto* t) { t->set_max_message_bytes(-1); }},
      {"max_message_bytes", [](auto* t) { t->set_max_message_bytes(4096); }},
      {"max_message_bytes", [](auto* t) { t->set_max_message_bytes(int64_t{3} << 30); }},
      {"chunk_bytes", [](auto* t) { t->set_chunk_bytes(-1); }},
      {"chunk_bytes", [](auto* t) { t->set_chunk_bytes(100); }},
      {"chunk_bytes", [](auto* t) { t->set_chunk_bytes(12 << 20); }},  // > 16 MiB / 2
      {"min_ping_interval_ms", [](auto* t) { t->set_min_ping_interval_ms(-1); }},
      {"keepalive_time_ms", [](auto* t) { t->set_keepalive_time_ms(-1); }},
      {"keepalive_time_ms", [](auto* t) { t->set_keepalive_time_ms(int64_t{1} << 40); }},
      {"keepalive_timeout_ms", [](auto* t) { t->set_keepalive_timeout_ms(-1); }},
      // Faster client pings than the server accepts: GOAWAY too_many_pings in production.
      {"keepalive_time_ms", [](auto* t) { t->set_keepalive_time_ms(5000); }},
      {"tls_key_path", [](auto* t) { t->set_tls_cert_path("/x/cert.pem"); }},
      {"require_client_cert", [](auto* t) { t->set_require_client_cert(true); }},
  };
  for (const BadCase& c : cases) {
    v1::TransportConfig config;
    c.edit(&config);
    SCOPED_TRACE(config.ShortDebugString());
    EXPECT_THAT(ResolveTransport(config),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.field)));
  }
  // The message of a sentinel says why it is not "unlimited" and shows the configured value.
  v1::TransportConfig minus_one;
  minus_one.set_max_message_bytes(-1);
  EXPECT_THAT(ResolveTransport(minus_one),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("transport.max_message_bytes"), HasSubstr("got -1"),
                             HasSubstr("no 'unlimited' sentinel"))));
}

TEST(TransportConfigTest, ServerConfigRejectsBadTransportNamingTheField) {
  v1::ServerConfig config;
  config.set_store_path("/tmp/unused");
  config.mutable_transport()->set_keepalive_timeout_ms(-1);
  EXPECT_THAT(ResolveServerConfig(config), StatusIs(absl::StatusCode::kInvalidArgument,
                                                    HasSubstr("transport.keepalive_timeout_ms")));
}

TEST(TransportConfigTest, ClientCertificateWithoutCaIsAnErrorNotPlaintext) {
  v1::TransportConfig config;
  config.set_tls_cert_path("/x/client.pem");
  config.set_tls_key_path("/x/client.key");
  ASSERT_OK_AND_ASSIGN(v1::TransportConfig resolved, ResolveTransport(config));
  EXPECT_THAT(MakeChannelCredentials(resolved),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tls_ca_path")));
  // Missing files are NOT_FOUND naming the path.
  resolved.set_tls_ca_path("/nonexistent/ca.pem");
  EXPECT_THAT(MakeChannelCredentials(resolved),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nonexistent/ca.pem")));
}

// A device's or relay's TLS key is a secret like the server's: another local user's file, or one
// open to group or others, is refused naming the path instead of being used.
TEST(TransportConfigTest, ClientKeyOpenToOthersIsRefusedNamingTheFile) {
  const std::filesystem::path dir = testing::FreshTestDir("client_key");
  v1::TransportConfig config;
  config.set_tls_ca_path(testing::WriteWithMode(dir / "ca.pem", "ca", 0644));
  config.set_tls_cert_path(testing::WriteWithMode(dir / "client.pem", "cert", 0644));
  config.set_tls_key_path(testing::WriteWithMode(dir / "client.key", "key", 0644));
  ASSERT_OK_AND_ASSIGN(v1::TransportConfig resolved, ResolveTransport(config));
  EXPECT_THAT(MakeChannelCredentials(resolved),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("client.key")));
  ASSERT_EQ(::chmod(resolved.tls_key_path().c_str(), 0600), 0);
  EXPECT_OK(MakeChannelCredentials(resolved).status());
  std::filesystem::remove_all(dir);
}

TEST(CertificateFingerprintTest, RejectsNonPem) {
  EXPECT_THAT(CertificateFingerprint("hello"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("PEM")));
  EXPECT_THAT(CertificateFingerprint("-----BEGIN CERTIFICATE-----\n!!!\n"
                                     "-----END CERTIFICATE-----\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("base64")));
  // The digest of the DER bytes (here: "abc", base64 YWJj).
  ASSERT_OK_AND_ASSIGN(std::string fp, CertificateFingerprint("-----BEGIN CERTIFICATE-----\nYWJj\n"
                                                              "-----END CERTIFICATE-----\n"));
  EXPECT_EQ(ToHex(fp), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

// fedsched-server --policy: the name sets selection.policy and the cache the policy implies, as
// fedsched-sim's --policy does (fedcase: importance; the others: LRU).
TEST(ServerConfigTest, PolicyFlagSetsThePolicyAndItsCache) {
  v1::ServerConfig config;
  config.set_store_path("/tmp/unused");  // required by ResolveServerConfig; nothing is opened
  config.mutable_cache()->set_policy(v1::CACHE_POLICY_IMPORTANCE);
  ASSERT_OK(ApplyPolicyFlag("oort", &config));
  EXPECT_EQ(config.selection().policy(), v1::SELECTION_POLICY_OORT);
  EXPECT_EQ(config.cache().policy(), v1::CACHE_POLICY_LRU);
  ASSERT_OK(ApplyPolicyFlag("fedcase", &config));
  EXPECT_EQ(config.cache().policy(), v1::CACHE_POLICY_IMPORTANCE);
  ASSERT_OK(ApplyPolicyFlag("FedSched", &config));
  EXPECT_EQ(config.selection().policy(), v1::SELECTION_POLICY_FEDSCHED);
  EXPECT_EQ(config.cache().policy(), v1::CACHE_POLICY_LRU);
  // Resolved, the preset's levers are in the printed config.
  ASSERT_OK_AND_ASSIGN(v1::ServerConfig resolved, ResolveServerConfig(config));
  EXPECT_TRUE(resolved.selection().workload_sizing());
  EXPECT_TRUE(resolved.selection().oort().hold_round_threshold());
  EXPECT_EQ(resolved.selection().extend_workload().beta(), 0.5);
  EXPECT_EQ(resolved.cache().policy(), v1::CACHE_POLICY_LRU);
  for (const char* bad : {"best", "unspecified", ""}) {
    v1::ServerConfig before = config;
    EXPECT_THAT(ApplyPolicyFlag(bad, &config),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--policy")));
    EXPECT_EQ(config.SerializeAsString(), before.SerializeAsString());
  }
}

}  // namespace
}  // namespace fedsched

namespace fedsched {
namespace {

// jobs.operator_cert_sha256 (docs/guides/JOBS.md): fingerprints as openssl prints them are kept in
// canonical form; anything else, or a list without mutual TLS, is refused naming the field.
TEST(ServerConfigTest, OperatorCertificatesAreCanonicalAndNeedMutualTls) {
  v1::ServerConfig config;
  config.set_store_path("/tmp/unused");  // required by ResolveServerConfig; nothing is opened
  const std::string hex(64, 'a');
  std::string colons = "AB";
  for (int i = 1; i < 32; ++i) colons.append(":AB");
  config.mutable_jobs()->add_operator_cert_sha256(colons);
  EXPECT_THAT(ResolveServerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("require_client_cert")));
  v1::TransportConfig* t = config.mutable_transport();
  t->set_tls_cert_path("server.pem");
  t->set_tls_key_path("server.key");
  t->set_tls_ca_path("ca.pem");
  t->set_require_client_cert(true);
  ASSERT_OK_AND_ASSIGN(v1::ServerConfig resolved, ResolveServerConfig(config));
  std::string lower;
  for (int i = 0; i < 32; ++i) lower += "ab";
  EXPECT_EQ(resolved.jobs().operator_cert_sha256(0), lower);
  config.mutable_jobs()->add_operator_cert_sha256(hex.substr(2));  // 31 bytes
  EXPECT_THAT(ResolveServerConfig(config), StatusIs(absl::StatusCode::kInvalidArgument,
                                                    HasSubstr("jobs.operator_cert_sha256[1]")));
  *config.mutable_jobs()->mutable_operator_cert_sha256(1) = std::string(63, 'a') + "g";
  EXPECT_THAT(ResolveServerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a SHA-256")));
}

// jobs.starvation_bound_s and jobs.speed_tiers (docs/guides/JOBS.md "Scheduling devices across
// jobs"): unset take 600 s and 2 tiers; 0 s (no bound) is kept; out-of-range values are refused
// naming the field.
TEST(ServerConfigTest, JobSchedulingDefaultsAndRanges) {
  v1::ServerConfig config;
  config.set_store_path("/tmp/unused");  // required by ResolveServerConfig; nothing is opened
  ASSERT_OK_AND_ASSIGN(v1::ServerConfig resolved, ResolveServerConfig(config));
  EXPECT_EQ(resolved.jobs().starvation_bound_s(), 600);
  EXPECT_EQ(resolved.jobs().speed_tiers(), 2);
  config.mutable_jobs()->set_starvation_bound_s(0);
  config.mutable_jobs()->set_speed_tiers(8);
  ASSERT_OK_AND_ASSIGN(resolved, ResolveServerConfig(config));
  EXPECT_TRUE(resolved.jobs().has_starvation_bound_s());
  EXPECT_EQ(resolved.jobs().starvation_bound_s(), 0);
  EXPECT_EQ(resolved.jobs().speed_tiers(), 8);
  for (double bad :
       {-1.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    v1::ServerConfig c = config;
    c.mutable_jobs()->set_starvation_bound_s(bad);
    EXPECT_THAT(ResolveServerConfig(c),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("jobs.starvation_bound_s")))
        << bad;
  }
  for (int bad : {-1, 9}) {
    v1::ServerConfig c = config;
    c.mutable_jobs()->set_speed_tiers(bad);
    EXPECT_THAT(ResolveServerConfig(c),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("jobs.speed_tiers")))
        << bad;
  }
}

}  // namespace
}  // namespace fedsched
