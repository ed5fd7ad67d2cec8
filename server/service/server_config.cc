#include "server/service/server_config.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/transport.h"
#include "server/aggregation/aggregation_rule_registry.h"
#include "server/planner/planner_options.h"
#include "server/planner/policy_registry.h"
#include "server/round/checkin_pacer.h"
#include "server/round/round_config.h"
#include "server/service/operator_auth.h"

namespace fedsched {
namespace {

// Also refuses NaN and infinities: no field of the server config means anything with them.
absl::Status CheckAtLeast(const char* field, double value, double minimum) {
  if (!std::isfinite(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("server config: ", field, " must be a finite number, got ", value));
  }
  if (value < minimum) {
    return absl::InvalidArgumentError(
        absl::StrCat("server config: ", field, " must be >= ", minimum, ", got ", value));
  }
  return absl::OkStatus();
}

// listen_address is HOST:PORT with PORT in [0, 65535] (0: the kernel picks one).
absl::Status CheckListenAddress(const std::string& address, const char* field = "listen_address") {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(absl::string_view(address).substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("server config: ", field, " must be HOST:PORT with PORT in [0, 65535], got '",
                     address, "'"));
  }
  return absl::OkStatus();
}

// The operations endpoints (docs/OPERATIONS.md): HOST:PORT each, on ports of their own.
absl::Status CheckOps(const v1::ServerConfig& config) {
  const v1::OpsConfig& ops = config.ops();
  const std::string& metrics = ops.metrics_listen_address();
  const std::string& health = ops.health_listen_address();
  if (!metrics.empty()) {
    FEDSCHED_RETURN_IF_ERROR(CheckListenAddress(metrics, "ops.metrics_listen_address"));
  }
  if (!health.empty()) {
    FEDSCHED_RETURN_IF_ERROR(CheckListenAddress(health, "ops.health_listen_address"));
  }
  auto port = [](const std::string& a) { return a.substr(a.rfind(':') + 1); };
  for (const std::string* a : {&metrics, &health}) {
    if (!a->empty() && port(*a) != "0" && port(*a) == port(config.listen_address())) {
      return absl::InvalidArgumentError(absl::StrCat("server config: ops endpoint '", *a,
                                                     "' uses the port of listen_address '",
                                                     config.listen_address(), "'"));
    }
  }
  if (!metrics.empty() && metrics == health && port(metrics) != "0") {
    return absl::InvalidArgumentError(absl::StrCat(
        "server config: ops.metrics_listen_address and ops.health_listen_address are both '",
        metrics, "'"));
  }
  return absl::OkStatus();
}

bool IsLoopbackAddress(const std::string& address) {
  if (absl::StartsWith(address, "unix:")) return true;
  const std::string host = address.substr(0, address.rfind(':'));
  if (host == "localhost" || host == "[::1]") return true;
  // An IPv4 literal in 127.0.0.0/8 only: a name such as 127.example.com may resolve anywhere.
  in_addr ipv4;
  return ::inet_pton(AF_INET, host.c_str(), &ipv4) == 1 && (ntohl(ipv4.s_addr) >> 24) == 127;
}

// Admission by provisioning (docs/SECURITY.md "Identities and admission"): an enrolment key unless
// mutual TLS proves identities, and trust on first use only as a loopback opt-in with bounded
// shares.
absl::Status ResolveAdmission(v1::ServerConfig& out) {
  v1::SecurityConfig* security = out.mutable_security();
  // An aggregator relays registrations to the root, which admits them.
  const bool admits = out.hierarchy().role() != v1::HierarchyConfig::ROLE_AGGREGATOR;
  if (admits && security->enrolment_key_path().empty() && !out.transport().require_client_cert()) {
    security->set_enrolment_key_path(out.store_path() + "/enrolment_key");
  }
  if (security->allow_trust_on_first_use() && !IsLoopbackAddress(out.listen_address())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "server config: security.allow_trust_on_first_use admits anyone who names an identity "
        "first and is for loopback demos only; listen_address '",
        out.listen_address(), "' is not loopback: provision devices with fedsched-enroll"));
  }
  // max_unproven_task_fraction shapes rounds: round::ResolveRoundConfig owns it.
  if (security->max_unproven_identity_fraction() == 0) {
    security->set_max_unproven_identity_fraction(0.5);
  }
  const double table_share = security->max_unproven_identity_fraction();
  if (!(table_share > 0 && table_share <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("server config: security.max_unproven_identity_fraction must be in (0, 1], "
                     "got ",
                     table_share));
  }
  return absl::OkStatus();
}

// The operator certificates of JobService (docs/JOBS.md): canonical fingerprints, and only where
// the server asks clients for a certificate.
absl::Status ResolveOperatorCertificates(v1::ServerConfig& out) {
  auto* listed = out.mutable_jobs()->mutable_operator_cert_sha256();
  if (!listed->empty() && !out.transport().require_client_cert()) {
    return absl::InvalidArgumentError(
        "server config: jobs.operator_cert_sha256 needs mutual TLS "
        "(transport.require_client_cert): without it no client presents a certificate");
  }
  for (int i = 0; i < listed->size(); ++i) {
    absl::StatusOr<std::string> canonical = CanonicalCertFingerprint(listed->Get(i));
    if (!canonical.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("server config: jobs.operator_cert_sha256[", i,
                                                     "]: ", canonical.status().message()));
    }
    *listed->Mutable(i) = *std::move(canonical);
  }
  return absl::OkStatus();
}

// Security defaults (docs/SECURITY.md) and the refusal to serve plaintext beyond this host.
absl::Status ResolveSecurity(v1::ServerConfig& out) {
  v1::SecurityConfig* security = out.mutable_security();
  if (!IsLoopbackAddress(out.listen_address()) && out.transport().tls_cert_path().empty() &&
      !security->allow_insecure_listen()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "server config: listen_address '", out.listen_address(),
        "' is not loopback and TLS is off (transport.tls_cert_path): credentials and updates "
        "would cross the network in plaintext; configure TLS, or set "
        "security.allow_insecure_listen: true"));
  }
  if (security->operator_token_path().empty()) {
    security->set_operator_token_path(out.store_path() + "/operator_token");
  }
  FEDSCHED_RETURN_IF_ERROR(ResolveAdmission(out));
  if (security->max_num_samples() == 0) security->set_max_num_samples(1000000);
  FEDSCHED_RETURN_IF_ERROR(
      CheckAtLeast("security.max_num_samples", security->max_num_samples(), 1));
  if (security->max_update_norm() == 0) security->set_max_update_norm(1000);
  FEDSCHED_RETURN_IF_ERROR(
      CheckAtLeast("security.max_update_norm", security->max_update_norm(), 0));
  if (security->norm_median_factor() == 0) security->set_norm_median_factor(20);
  FEDSCHED_RETURN_IF_ERROR(
      CheckAtLeast("security.norm_median_factor", security->norm_median_factor(), 1));
  if (security->max_new_identities_per_peer_per_minute() == 0) {
    security->set_max_new_identities_per_peer_per_minute(600);
  }
  if (security->max_new_identities_per_minute() == 0) {
    security->set_max_new_identities_per_minute(3000);
  }
  if (security->unseen_identity_ttl_s() == 0) security->set_unseen_identity_ttl_s(3600);
  const double heartbeat_timeout_s =
      static_cast<double>(out.heartbeat_interval_ms()) * out.missed_heartbeats() / 1000.0;
  if (security->unseen_identity_ttl_s() > 0) {
    FEDSCHED_RETURN_IF_ERROR(CheckAtLeast("security.unseen_identity_ttl_s",
                                          security->unseen_identity_ttl_s(), heartbeat_timeout_s));
  }
  if (security->max_identities() == 0) security->set_max_identities(10000);
  FEDSCHED_RETURN_IF_ERROR(CheckAtLeast("security.max_identities", security->max_identities(), 1));
  return ResolveOperatorCertificates(out);
}

// Hierarchical aggregation (docs/ARCHITECTURE.md "Hierarchical aggregation"): the role's
// defaults, and the combinations a tier cannot carry.
absl::Status ResolveHierarchy(v1::ServerConfig& out) {
  v1::HierarchyConfig* h = out.mutable_hierarchy();
  if (h->role() == v1::HierarchyConfig::ROLE_UNSPECIFIED)
    h->set_role(v1::HierarchyConfig::ROLE_FLAT);
  if (h->masked_sums()) {
    return absl::InvalidArgumentError(
        "server config: hierarchy.masked_sums needs secure aggregation wired into the RPCs, "
        "which is not done yet (only the protocol core, secagg/, exists); the tiers "
        "carry plain weighted sums only");
  }
  if (h->role() == v1::HierarchyConfig::ROLE_FLAT) return absl::OkStatus();
  absl::StatusOr<AggregationRuleProperties> rule = AggregationRulePropertiesOf(out.aggregation());
  if (!rule.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("server config: ", rule.status().message()));
  }
  if (!rule->composes_with_hierarchy) {
    return absl::InvalidArgumentError(absl::StrCat(
        "server config: aggregation.rule ", AggregationRuleDisplayName(out.aggregation()),
        " needs every individual update and cannot run in a hierarchy (hierarchy.role ",
        v1::HierarchyConfig::Role_Name(h->role()), "): use FedAvg or a FedOpt rule"));
  }
  if (out.aggregation().async_fedbuff() || out.audit_updates()) {
    return absl::InvalidArgumentError(
        "server config: aggregation.async_fedbuff and audit_updates need each update at the "
        "root and cannot run in a hierarchy (hierarchy.role set)");
  }
  if (h->role() == v1::HierarchyConfig::ROLE_ROOT && h->aggregator_token_dir().empty()) {
    h->set_aggregator_token_dir(out.store_path() + "/aggregator_tokens");
  }
  if (h->role() != v1::HierarchyConfig::ROLE_AGGREGATOR) return absl::OkStatus();
  if (h->upstream_address().empty() || h->upstream_token_path().empty()) {
    return absl::InvalidArgumentError(
        "server config: hierarchy.role ROLE_AGGREGATOR needs hierarchy.upstream_address and "
        "hierarchy.upstream_token_path");
  }
  FEDSCHED_RETURN_IF_ERROR(CheckListenAddress(h->upstream_address(), "hierarchy.upstream_address"));
  if (h->aggregator_id().empty()) h->set_aggregator_id(out.listen_address());
  if (h->flush_before_deadline_ms() == 0) h->set_flush_before_deadline_ms(2000);
  return round::CheckDuration("server config", "hierarchy.flush_before_deadline_ms (in s)",
                              static_cast<double>(h->flush_before_deadline_ms()) / 1000.0, 0);
}

}  // namespace

absl::StatusOr<v1::ServerConfig> ResolveServerConfig(const v1::ServerConfig& config) {
  v1::ServerConfig out = config;
  if (out.listen_address().empty()) out.set_listen_address("127.0.0.1:50051");
  FEDSCHED_RETURN_IF_ERROR(CheckListenAddress(out.listen_address()));
  FEDSCHED_RETURN_IF_ERROR(ResolveHierarchy(out));
  // An aggregator keeps nothing on disk: the root owns every durable fact.
  if (out.store_path().empty() && out.hierarchy().role() != v1::HierarchyConfig::ROLE_AGGREGATOR) {
    return absl::InvalidArgumentError(
        "server config: store_path is required (set it in the config or pass --store_path, "
        "with --check_config as at start)");
  }
  FEDSCHED_ASSIGN_OR_RETURN(out, round::ResolveRoundConfig(out));

  if (out.heartbeat_interval_ms() == 0) out.set_heartbeat_interval_ms(2000);
  FEDSCHED_RETURN_IF_ERROR(CheckAtLeast("heartbeat_interval_ms", out.heartbeat_interval_ms(), 10));
  if (out.missed_heartbeats() == 0) out.set_missed_heartbeats(3);
  FEDSCHED_RETURN_IF_ERROR(CheckAtLeast("missed_heartbeats", out.missed_heartbeats(), 1));
  if (out.shutdown_grace_s() == 0) out.set_shutdown_grace_s(10);
  FEDSCHED_RETURN_IF_ERROR(
      round::CheckDuration("server config", "shutdown_grace_s", out.shutdown_grace_s(), 0));
  if (out.checkpoint_every_rounds() == 0) out.set_checkpoint_every_rounds(1);
  if (out.checkpoint_every_rounds() > 1 &&
      (out.audit_updates() || out.aggregation().async_fedbuff())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "server config: checkpoint_every_rounds ", out.checkpoint_every_rounds(),
        " cannot be combined with audit_updates or aggregation.async_fedbuff (they need every "
        "round durable); use 1"));
  }

  v1::EvalConfig* eval = out.mutable_eval();
  if (eval->test_images_path().empty()) {
    eval->set_test_images_path("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz");
  }
  if (eval->test_labels_path().empty()) {
    eval->set_test_labels_path("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz");
  }

  FEDSCHED_ASSIGN_OR_RETURN(*out.mutable_transport(), ResolveTransport(out.transport()));
  FEDSCHED_RETURN_IF_ERROR(ResolveSecurity(out));
  FEDSCHED_RETURN_IF_ERROR(CheckOps(out));
  // Pace steering's defaults, written out so the effective config shows them; the pacer checks
  // the ranges (server/round/checkin_pacer.h).
  v1::PacingConfig* pacing = out.mutable_pacing();
  if (pacing->pool_factor() == 0) pacing->set_pool_factor(2.0);
  if (pacing->max_checkin_interval_s() == 0) pacing->set_max_checkin_interval_s(600);
  FEDSCHED_RETURN_IF_ERROR(round::CheckDuration("server config", "pacing.max_checkin_interval_s",
                                                pacing->max_checkin_interval_s(), 0));
  FEDSCHED_RETURN_IF_ERROR(round::PacerOptions::FromServerConfig(out, /*hold_s=*/5.0).status());
  return out;
}

absl::Status ApplyPolicyFlag(const std::string& policy, v1::ServerConfig* config) {
  // The simulator's --policy goes through the same function, so both set the same cache.
  return planner::ApplyPolicyFlag(policy, config);
}

}  // namespace fedsched
