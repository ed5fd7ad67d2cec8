#include "server/round/round_config.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cache/cache_policy.h"
#include "common/compress/properties.h"
#include "common/compress/update_codec.h"
#include "common/status_macros.h"
#include "secagg/graph.h"
#include "secagg/protocol.h"
#include "server/aggregation/aggregation_rule_registry.h"
#include "server/aggregation/aggregator.h"
#include "server/aggregation/stale_updates.h"
#include "server/planner/planner_options.h"
#include "server/planner/policy_registry.h"
#include "server/privacy/round_privacy.h"

namespace fedsched::round {
namespace {

// Also refuses NaN and infinities: no round setting means anything with them.
absl::Status CheckAtLeast(const std::string& where, const char* field, double value,
                          double minimum) {
  if (!std::isfinite(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", field, " must be a finite number, got ", value));
  }
  if (value < minimum) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", field, " must be >= ", minimum, ", got ", value));
  }
  return absl::OkStatus();
}

// A fraction setting: finite and in [lo, hi].
absl::Status CheckFraction(const std::string& where, const char* field, double value, double lo,
                           double hi) {
  if (!std::isfinite(value) || value < lo || value > hi) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", field, " must be a fraction in [",
                                                   lo, ", ", hi, "], got ", value));
  }
  return absl::OkStatus();
}

// The collapse guard and bounded influence (docs/guides/SECURITY.md "Updates").
absl::Status ResolveInfluence(const std::string& where, v1::ServerConfig& out) {
  v1::SecurityConfig* security = out.mutable_security();
  if (security->max_accuracy_drop() == 0) security->set_max_accuracy_drop(kDefaultMaxAccuracyDrop);
  FEDSCHED_RETURN_IF_ERROR(
      CheckFraction(where, "security.max_accuracy_drop", security->max_accuracy_drop(), 0, 1));
  if (security->max_client_weight_share() == 0) {
    security->set_max_client_weight_share(DefaultMaxClientWeightShare(out.clients_per_round()));
  }
  const double share = security->max_client_weight_share();
  if (!(share > 0) || share > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": security.max_client_weight_share must be a fraction in (0, 1], got ", share));
  }
  FEDSCHED_RETURN_IF_ERROR(
      CheckDuration(where, "security.failure_cooldown_s", security->failure_cooldown_s(), 0));
  if (!(security->unseen_identity_ttl_s() < 0)) {  // negative = never; NaN is refused
    FEDSCHED_RETURN_IF_ERROR(CheckDuration(where, "security.unseen_identity_ttl_s",
                                           security->unseen_identity_ttl_s(), 0));
  }
  return absl::OkStatus();
}

absl::Status ResolveCounts(const std::string& where, v1::ServerConfig& out) {
  if (out.clients_per_round() == 0) out.set_clients_per_round(10);
  FEDSCHED_RETURN_IF_ERROR(CheckAtLeast(where, "clients_per_round", out.clients_per_round(), 1));
  if (out.min_updates() == 0) out.set_min_updates(std::max(1, out.clients_per_round() / 2));
  FEDSCHED_RETURN_IF_ERROR(CheckAtLeast(where, "min_updates", out.min_updates(), 1));
  if (out.min_updates() > out.clients_per_round()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": min_updates (", out.min_updates(),
                                                   ") > clients_per_round (",
                                                   out.clients_per_round(), ")"));
  }
  FEDSCHED_RETURN_IF_ERROR(CheckAtLeast(where, "num_rounds", out.num_rounds(), 0));
  if (out.round_deadline_s() == 0) out.set_round_deadline_s(120);
  FEDSCHED_RETURN_IF_ERROR(CheckDuration(where, "round_deadline_s", out.round_deadline_s(), 0.001));
  if (out.round_closing() == v1::ROUND_CLOSING_UNSPECIFIED) {
    out.set_round_closing(v1::ROUND_CLOSING_FIRST_K);
  }
  if (out.min_online_clients() == 0) out.set_min_online_clients(out.min_updates());
  if (out.min_online_clients() < out.min_updates()) {
    // A round planned with fewer clients than min_updates can never commit: it would fail and
    // be re-planned without end.
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": min_online_clients (", out.min_online_clients(), ") < min_updates (",
                     out.min_updates(), "): no round could ever commit"));
  }
  if (out.seed() == 0) out.set_seed(1);
  if (out.replan_backoff_after_failures() == 0) out.set_replan_backoff_after_failures(5);
  FEDSCHED_RETURN_IF_ERROR(
      CheckAtLeast(where, "replan_backoff_after_failures", out.replan_backoff_after_failures(), 1));
  if (out.replan_backoff_max_s() == 0) out.set_replan_backoff_max_s(300);
  FEDSCHED_RETURN_IF_ERROR(
      CheckDuration(where, "replan_backoff_max_s", out.replan_backoff_max_s(), 1));
  // The never-proven share of a cohort (RoundEngine::LimitUnprovenClients).
  v1::SecurityConfig* security = out.mutable_security();
  if (security->max_unproven_task_fraction() == 0) security->set_max_unproven_task_fraction(0.2);
  const double share = security->max_unproven_task_fraction();
  if (!(share >= 0 && share <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": security.max_unproven_task_fraction must be in [0, 1], got ", share));
  }
  return absl::OkStatus();
}

absl::Status ResolveTraining(const std::string& where, v1::ServerConfig& out) {
  v1::TrainingConfig* training = out.mutable_training();
  if (training->local_epochs() == 0 && training->local_steps() == 0) training->set_local_epochs(1);
  FEDSCHED_RETURN_IF_ERROR(
      CheckAtLeast(where, "training.local_epochs", training->local_epochs(), 0));
  FEDSCHED_RETURN_IF_ERROR(CheckAtLeast(where, "training.local_steps", training->local_steps(), 0));
  if (training->batch_size() == 0) training->set_batch_size(32);
  FEDSCHED_RETURN_IF_ERROR(CheckAtLeast(where, "training.batch_size", training->batch_size(), 1));
  if (training->learning_rate() == 0) training->set_learning_rate(0.05f);
  FEDSCHED_RETURN_IF_ERROR(
      CheckAtLeast(where, "training.learning_rate", training->learning_rate(), 1e-9));
  FEDSCHED_RETURN_IF_ERROR(CheckAtLeast(where, "training.proximal_mu", training->proximal_mu(), 0));
  v1::ModelConfig* model = out.mutable_model();
  // A named-tensor model (weights from a file, no architecture) keeps its empty architecture.
  if (model->architecture().empty() && model->initial_weights_path().empty()) {
    model->set_architecture("mlp");
  }
  if (model->hidden_units() == 0) model->set_hidden_units(128);
  if (model->init_seed() == 0) model->set_init_seed(1);
  if (out.eval().every_n_rounds() == 0) out.mutable_eval()->set_every_n_rounds(1);
  const bool named_model = model->architecture().empty();
  v1::EvalConfig* eval = out.mutable_eval();
  if (eval->mode() == v1::EVAL_MODE_UNSPECIFIED) {
    eval->set_mode(named_model ? v1::EVAL_MODE_CLIENT : v1::EVAL_MODE_SERVER);
  }
  if (named_model && eval->mode() == v1::EVAL_MODE_SERVER) {
    return absl::InvalidArgumentError(absl::StrCat(
        where,
        ": eval.mode EVAL_MODE_SERVER needs a model.architecture the server can run; a "
        "named-tensor model (initial_weights_path without architecture) is evaluated by "
        "the clients (EVAL_MODE_CLIENT) or not at all (EVAL_MODE_NONE)"));
  }
  FEDSCHED_RETURN_IF_ERROR(
      CheckAtLeast(where, "eval.every_n_rounds", out.eval().every_n_rounds(), 1));
  return absl::OkStatus();
}

absl::Status ResolveSelection(const std::string& where, v1::ServerConfig& out) {
  v1::SelectionConfig* selection = out.mutable_selection();
  // Before the cache default below: a policy's preset may name its own cache (fedsched: LRU).
  const absl::Status policy = planner::ResolveSelectionPolicy(&out).status();
  if (!policy.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", policy.message()));
  }
  if (selection->overcommit() == 0) selection->set_overcommit(kDefaultOvercommit);
  FEDSCHED_RETURN_IF_ERROR(
      CheckAtLeast(where, "selection.overcommit", selection->overcommit(), 1.0));
  if (selection->min_local_steps() == 0) selection->set_min_local_steps(1);
  FEDSCHED_RETURN_IF_ERROR(
      CheckAtLeast(where, "selection.utility_noise_factor", selection->utility_noise_factor(), 0));
  v1::CacheConfig* cache = out.mutable_cache();
  if (cache->policy() == v1::CACHE_POLICY_UNSPECIFIED) {
    cache->set_policy(v1::CACHE_POLICY_IMPORTANCE);
  }
  if (!cache->policy_name().empty()) {
    // The name wins; a built-in named by name also sets the enum, so that both agree.
    absl::StatusOr<std::shared_ptr<const CachePolicy>> policy = MakeCachePolicy(*cache);
    if (!policy.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": cache.policy_name: ", policy.status().message()));
    }
    if ((*policy)->enum_value() != v1::CACHE_POLICY_UNSPECIFIED) {
      cache->set_policy((*policy)->enum_value());
    }
  }
  if (cache->capacity_fraction() == 0) cache->set_capacity_fraction(0.1);
  if (!(cache->capacity_fraction() >= 0 && cache->capacity_fraction() <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": cache.capacity_fraction must be in [0, 1], got ", cache->capacity_fraction()));
  }
  // 0 = FedCaSe's adaptive factor on the device (docs/ALGORITHMS.md §4.5).
  return CheckAtLeast(where, "cache.replication_factor", cache->replication_factor(), 0);
}

// What staleness-aware aggregation (AggregationConfig.stale_updates) cannot run with, or empty: it
// folds a late update into the running sum with its own weight against the fresh mean, so it
// needs that sum and each update.
std::string StaleUpdatesConflict(const v1::ServerConfig& out,
                                 const AggregationRuleProperties& rule) {
  if (out.aggregation().async_fedbuff()) {
    return "aggregation.async_fedbuff (which has its own staleness weights)";
  }
  if (!rule.linear) {
    return absl::StrCat("aggregation.rule ", AggregationRuleDisplayName(out.aggregation()),
                        ", which needs every update at once (use FedAvg, FedAvgM or a FedOpt "
                        "rule)");
  }
  if (out.secure_aggregation().enabled()) {
    return "secure_aggregation.enabled (the server never sees a single update)";
  }
  if (privacy::PrivacyEnabled(out)) {
    return "differential privacy (a weighted late update changes the sum's sensitivity)";
  }
  return "";
}

// Stale updates as configured, or, under SELECTION_POLICY_FEDSCHED when the config does not name
// aggregation.stale_updates, on wherever the aggregation allows them (docs/ALGORITHMS.md §11):
// part of fedsched's preset that needs the aggregation rule, so it is applied here rather than by
// the planner. A configured one that cannot run is refused, naming the conflict.
absl::Status ResolveStaleUpdates(const std::string& where, v1::ServerConfig& out,
                                 const AggregationRuleProperties& rule) {
  const std::string conflict = StaleUpdatesConflict(out, rule);
  if (!out.aggregation().has_stale_updates() &&
      out.selection().policy() == v1::SELECTION_POLICY_FEDSCHED) {
    if (!conflict.empty()) return absl::OkStatus();
    v1::StaleUpdatesConfig* stale = out.mutable_aggregation()->mutable_stale_updates();
    stale->set_enable(true);
    ApplyStaleUpdatesDefaults(*stale);
    return absl::OkStatus();
  }
  if (!out.aggregation().stale_updates().enable() || conflict.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": aggregation.stale_updates does not run with ", conflict));
}

absl::Status ResolveAggregation(const std::string& where, v1::ServerConfig& out) {
  // The aggregation block with its defaults filled in (printed with the effective config), and
  // its errors reported here, before anything starts.
  // Server-side clipping is on by default, bound 10 (docs/guides/SECURITY.md): no single update
  // moves the model by more than this L2 norm times its weight share.
  if (out.aggregation().clip_update_norm() == 0) {
    out.mutable_aggregation()->set_clip_update_norm(10.0);
  }
  absl::StatusOr<v1::AggregationConfig> aggregation = EffectiveAggregationConfig(out.aggregation());
  if (!aggregation.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": aggregation: ", aggregation.status().message()));
  }
  *out.mutable_aggregation() = *aggregation;
  FEDSCHED_ASSIGN_OR_RETURN(const AggregationRuleProperties rule,
                            AggregationRulePropertiesOf(out.aggregation()));
  if (out.aggregation().async_fedbuff() && !rule.composes_with_fedbuff) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": aggregation.rule ",
                                                   AggregationRuleDisplayName(out.aggregation()),
                                                   " does not run with aggregation.async_fedbuff"));
  }
  // Krum accepts any round size (Flower's max(1, K - f - 2) neighbours): no check on min_updates.
  return ResolveStaleUpdates(where, out, rule);
}

// PyramidFL's update dropout is on: configured, or by default under the policy (pyramidfl's
// SelectionPolicyKind::workload_defaults).
bool UpdateDropoutOn(const v1::ServerConfig& c) {
  const v1::WorkloadExtensionConfig& ext = c.selection().extend_workload();
  if (ext.disable_dropout()) return false;
  if (ext.dropout_high() > 0) return true;
  absl::StatusOr<const planner::SelectionPolicyKind*> policy =
      planner::ConfiguredSelectionPolicy(c.selection());
  return policy.ok() && (*policy)->workload_defaults().dropout_high > 0;
}

// What cannot run under secure aggregation (docs/guides/SECURE_AGGREGATION.md): every feature that
// needs individual updates at the server.
absl::Status CheckSecAggCompatible(const std::string& where, const v1::ServerConfig& out) {
  absl::StatusOr<AggregationRuleProperties> rule = AggregationRulePropertiesOf(out.aggregation());
  if (!rule.ok())
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", rule.status().message()));
  if (!rule->composes_with_secure_aggregation) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": aggregation.rule ", AggregationRuleDisplayName(out.aggregation()),
        " needs every individual update, which secure_aggregation.enabled never shows the "
        "server: use FedAvg or a FedOpt rule, or turn secure aggregation off"));
  }
  if (out.aggregation().async_fedbuff()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where,
                     ": aggregation.async_fedbuff weights each update by its own staleness at the "
                     "server, which secure_aggregation.enabled does not allow"));
  }
  if (out.audit_updates()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where,
                     ": audit_updates stores every individual update, which "
                     "secure_aggregation.enabled never shows the server"));
  }
  if (UpdateDropoutOn(out)) {
    return absl::InvalidArgumentError(absl::StrCat(
        where,
        ": selection.extend_workload update dropout (on by default under "
        "SELECTION_POLICY_PYRAMIDFL) sends partial updates, which secure_aggregation.enabled "
        "cannot mask: set selection.extend_workload.disable_dropout"));
  }
  return absl::OkStatus();
}

// Secure aggregation (docs/guides/SECURE_AGGREGATION.md): what cannot run without individual
// updates at the server, then the graph's degree and threshold for the round's cohort.
absl::Status ResolveSecureAggregation(const std::string& where, v1::ServerConfig& out) {
  if (!out.secure_aggregation().enabled()) return absl::OkStatus();
  FEDSCHED_RETURN_IF_ERROR(CheckSecAggCompatible(where, out));
  v1::SecureAggregationConfig* s = out.mutable_secure_aggregation();
  const uint32_t n = static_cast<uint32_t>(
      std::ceil(out.clients_per_round() * out.selection().overcommit() - 1e-9));
  FEDSCHED_RETURN_IF_ERROR(CheckAtLeast(where, "secure_aggregation.degree", s->degree(), 0));
  FEDSCHED_RETURN_IF_ERROR(CheckAtLeast(where, "secure_aggregation.threshold", s->threshold(), 0));
  if (s->degree() == 0) s->set_degree(static_cast<int32_t>(secagg::ChooseDegree(n)));
  if (s->threshold() == 0)
    s->set_threshold(static_cast<int32_t>(secagg::ChooseThreshold(s->degree())));
  v1::SecAggRoundParams params;
  params.set_cohort_size(n);
  params.set_degree(s->degree());
  params.set_threshold(s->threshold());
  params.set_graph_seed(std::string(32, '\0'));
  params.set_vector_length(1);
  // The clients clip to aggregation.clip_update_norm, or to differential privacy's clip.
  const bool dp = privacy::PrivacyEnabled(out);
  if (!dp && !(out.aggregation().clip_update_norm() > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        where,
        ": secure_aggregation.enabled needs aggregation.clip_update_norm > 0: each client "
        "clips its update to it before quantising, so that the masked sum cannot wrap"));
  }
  params.set_clip_norm(dp ? 1.0 : out.aggregation().clip_update_norm());
  // bits_per_element: 0 = 32; the cohort must fit the ring (secagg::ChooseScale).
  if (s->bits_per_element() != 0 && (s->bits_per_element() < 8 || s->bits_per_element() > 32)) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": secure_aggregation.bits_per_element must be in [8, 32] (0 = 32), got ",
        s->bits_per_element()));
  }
  params.set_bits_per_element(static_cast<uint32_t>(s->bits_per_element()));
  if (absl::Status st = secagg::ResolveParams(params).status(); !st.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": secure_aggregation for a cohort of ", n,
                     " (clients_per_round x selection.overcommit): ", st.message()));
  }
  if (out.hierarchy().role() == v1::HierarchyConfig::ROLE_ROOT ||
      out.hierarchy().role() == v1::HierarchyConfig::ROLE_AGGREGATOR) {
    return absl::InvalidArgumentError(absl::StrCat(
        where,
        ": secure_aggregation with a hierarchy: aggregators cannot forward masked sums yet "
        "(hierarchy.masked_sums), and a plaintext partial sum would show the server a few "
        "clients' sum"));
  }
  FEDSCHED_RETURN_IF_ERROR(
      CheckDuration(where, "secure_aggregation.step_timeout_s", s->step_timeout_s(), 0.0));
  if (s->step_timeout_s() == 0) {
    s->set_step_timeout_s(std::max(2.0, 0.1 * out.round_deadline_s()));
  }
  return absl::OkStatus();
}

// The default ladder of adaptive compression when compression.levels is empty (config.proto):
// FLOAT32, FP16, QSGD 8-, 4- and 2-bit in blocks of 256.
std::vector<v1::UpdateCompression> DefaultCompressionLevels() {
  std::vector<v1::UpdateCompression> levels(5);
  levels[0].set_format(v1::CompressedTensor::FLOAT32);
  levels[1].set_format(v1::CompressedTensor::FP16);
  for (int k = 2; k < 5; ++k) {
    levels[k].set_format(v1::CompressedTensor::QSGD);
    levels[k].set_bits(8 >> (k - 2));
    levels[k].set_block_size(256);
  }
  return levels;
}

// Update compression (docs/guides/COMPRESSION.md "Server checks"): every compressor valid
// (compress::SpecFrom), and refused where the round cannot use it: under secure aggregation a
// format that does not add up inside the masked sum (compress::PropertiesOf), with PyramidFL's
// update dropout (partial updates) or a hierarchy (relays fold float32 updates only). Robust
// rules, clipping and the norm screens run on the decompressed update: allowed.
absl::Status CheckCompression(const std::string& where, const v1::ServerConfig& out) {
  const v1::CompressionConfig& c = out.compression();
  auto check = [&](const std::string& field, const v1::UpdateCompression& u) {
    absl::Status s = compress::SpecFrom(u).status();
    return s.ok() ? s
                  : absl::InvalidArgumentError(absl::StrCat(where, ": ", field, ": ", s.message()));
  };
  FEDSCHED_RETURN_IF_ERROR(check("compression.uplink", c.uplink()));
  for (int i = 0; i < c.levels_size(); ++i) {
    FEDSCHED_RETURN_IF_ERROR(check(absl::StrCat("compression.levels[", i, "]"), c.levels(i)));
  }
  FEDSCHED_RETURN_IF_ERROR(check("compression.downlink", c.downlink()));
  // The compressors a participant may be given, named as in the config.
  std::vector<std::pair<std::string, v1::UpdateCompression>> used;
  if (!c.adaptive()) {
    used.emplace_back("compression.uplink", c.uplink());
  } else if (c.levels_size() == 0) {
    for (const v1::UpdateCompression& level : DefaultCompressionLevels()) {
      used.emplace_back("compression.levels (default)", level);
    }
  } else {
    for (int i = 0; i < c.levels_size(); ++i) {
      used.emplace_back(absl::StrCat("compression.levels[", i, "]"), c.levels(i));
    }
  }
  bool compressed = false;
  for (const auto& [field, uplink] : used) {
    if (compress::IsUncompressed(uplink)) continue;
    compressed = true;
    const compress::CompressorProperties properties =
        compress::PropertiesOf(*compress::SpecFrom(uplink));
    if (out.secure_aggregation().enabled() && !properties.composes_with_secagg) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": ", field, " ", compress::Describe(uplink),
          " does not compose with secure_aggregation.enabled: ", properties.secagg_reason));
    }
  }
  if (!compressed) return absl::OkStatus();
  if (UpdateDropoutOn(out)) {
    return absl::InvalidArgumentError(absl::StrCat(
        where,
        ": update compression with selection.extend_workload update dropout (on by default "
        "under SELECTION_POLICY_PYRAMIDFL): a device sends either a partial float32 update or "
        "a compressed one, not both; set selection.extend_workload.disable_dropout or turn "
        "compression off"));
  }
  if (out.hierarchy().role() == v1::HierarchyConfig::ROLE_ROOT ||
      out.hierarchy().role() == v1::HierarchyConfig::ROLE_AGGREGATOR) {
    return absl::InvalidArgumentError(absl::StrCat(
        where,
        ": update compression with a hierarchy: aggregators take float32 updates only; turn "
        "compression off"));
  }
  return absl::OkStatus();
}

// Scheduling devices across jobs (docs/guides/JOBS.md): jobs.starvation_bound_s (unset: 600 s;
// finite,
// >= 0 and at most 30 days; 0 = no bound) and jobs.speed_tiers (0 = 2; 1 to 8), resolved here so
// that the server and the simulator's job ledger start from the same values.
absl::Status ResolveJobScheduling(const std::string& where, v1::ServerConfig& out) {
  v1::JobsConfig* jobs = out.mutable_jobs();
  if (!jobs->has_starvation_bound_s()) jobs->set_starvation_bound_s(600);
  FEDSCHED_RETURN_IF_ERROR(
      CheckDuration(where, "jobs.starvation_bound_s", jobs->starvation_bound_s(), 0));
  if (jobs->speed_tiers() == 0) jobs->set_speed_tiers(2);
  if (jobs->speed_tiers() < 1 || jobs->speed_tiers() > 8) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": jobs.speed_tiers must be in [1, 8] (0 = 2), got ", jobs->speed_tiers()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckDuration(const std::string& where, const char* field, double value,
                           double minimum) {
  FEDSCHED_RETURN_IF_ERROR(CheckAtLeast(where, field, value, minimum));
  // Beyond, deadlines and backoffs stop meaning anything (1e300 s overflowed the records'
  // milliseconds).
  if (value > kMaxDurationS) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", field, " must be at most ",
                                                   kMaxDurationS, " s (30 days), got ", value));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::ServerConfig> ResolveRoundConfig(const v1::ServerConfig& config,
                                                    const std::string& where) {
  v1::ServerConfig out = config;
  FEDSCHED_RETURN_IF_ERROR(ResolveCounts(where, out));
  FEDSCHED_RETURN_IF_ERROR(ResolveInfluence(where, out));
  FEDSCHED_RETURN_IF_ERROR(ResolveTraining(where, out));
  FEDSCHED_RETURN_IF_ERROR(ResolveSelection(where, out));
  FEDSCHED_RETURN_IF_ERROR(ResolveAggregation(where, out));
  FEDSCHED_RETURN_IF_ERROR(privacy::ResolvePrivacyConfig(where, out));
  FEDSCHED_RETURN_IF_ERROR(ResolveSecureAggregation(where, out));
  FEDSCHED_RETURN_IF_ERROR(CheckCompression(where, out));
  FEDSCHED_RETURN_IF_ERROR(ResolveJobScheduling(where, out));
  // Last, on the resolved config: the planner's ranges, so that what the round engine would
  // refuse at its creation is refused here already (--check_config, a job's submission).
  if (absl::Status planner = planner::PlannerOptions::FromServerConfig(out).status();
      !planner.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", planner.message()));
  }
  return out;
}

}  // namespace fedsched::round
