#include "server/planner/planner_options.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "server/planner/policy_registry.h"

namespace fedsched::planner {
namespace {

absl::Status OutOfRange(absl::string_view field, double value, absl::string_view range) {
  return absl::InvalidArgumentError(absl::StrCat(field, " must be ", range, ", got ", value));
}

// Finite and in [lo, hi].
bool In(double v, double lo, double hi) { return std::isfinite(v) && v >= lo && v <= hi; }

template <typename T>
T OrDefault(T value, T fallback) {
  return value != T{} ? value : fallback;
}

absl::Status ValidateOort(const OortOptions& r) {
  if (!In(r.exploration_factor, 0, 1)) {
    return OutOfRange("selection.oort.exploration_factor", r.exploration_factor, "in [0, 1]");
  }
  if (!In(r.exploration_decay, 0, 1) || r.exploration_decay == 0) {
    return OutOfRange("selection.oort.exploration_decay", r.exploration_decay, "in (0, 1]");
  }
  if (!In(r.exploration_min, 0, 1)) {
    return OutOfRange("selection.oort.exploration_min", r.exploration_min, "in [0, 1]");
  }
  if (!In(r.round_threshold, 0, 100) || r.round_threshold == 0) {
    return OutOfRange("selection.oort.round_threshold", r.round_threshold, "in (0, 100]");
  }
  if (!In(r.round_penalty, 0, 1e6)) {
    return OutOfRange("selection.oort.round_penalty", r.round_penalty, ">= 0");
  }
  if (!In(r.clip_bound, 0, 1) || r.clip_bound == 0) {
    return OutOfRange("selection.oort.clip_bound", r.clip_bound, "in (0, 1]");
  }
  if (!In(r.cut_off_util, 0, 1e6)) {
    return OutOfRange("selection.oort.cut_off_util", r.cut_off_util, ">= 0");
  }
  if (r.pacer_step < 1) return OutOfRange("selection.oort.pacer_step", r.pacer_step, ">= 1");
  if (!In(r.pacer_delta, 0, 100) || r.pacer_delta == 0) {
    return OutOfRange("selection.oort.pacer_delta", r.pacer_delta, "in (0, 100]");
  }
  if (r.sample_window < 1) {
    return OutOfRange("selection.oort.sample_window", r.sample_window, ">= 1");
  }
  return absl::OkStatus();
}

absl::Status ValidateFedCaseAndCache(const FedCaseOptions& f, const CachePlanOptions& c) {
  if (!In(f.top_ratio, 0, 1e6)) {
    return OutOfRange("selection.fedcase.top_ratio", f.top_ratio, ">= 0");
  }
  if (!In(f.speed_weight, 0, 1)) {
    return OutOfRange("selection.fedcase.speed_weight", f.speed_weight, "in [0, 1]");
  }
  if (f.base_policy != v1::FedCaseConfig::BASE_POLICY_OORT &&
      f.base_policy != v1::FedCaseConfig::BASE_POLICY_RANDOM) {
    return OutOfRange("selection.fedcase.base_policy", f.base_policy,
                      "BASE_POLICY_OORT or BASE_POLICY_RANDOM");
  }
  if (!In(c.capacity_fraction, 0, 1) || c.capacity_fraction == 0) {
    return OutOfRange("cache.capacity_fraction", c.capacity_fraction, "in (0, 1]");
  }
  if (c.replication_factor < 0) {
    return OutOfRange("cache.replication_factor", c.replication_factor, ">= 0");
  }
  return absl::OkStatus();
}

absl::Status ValidateRoundAndTraining(const PlannerOptions& o) {
  if (o.min_local_steps < 1) {
    return OutOfRange("selection.min_local_steps", o.min_local_steps, ">= 1");
  }
  if (!In(o.workload_fit_fraction, 0, 1) || o.workload_fit_fraction == 0) {
    return OutOfRange("workload_fit_fraction", o.workload_fit_fraction, "in (0, 1]");
  }
  if (!In(o.extend_workload_beta, 0, 1)) {
    return OutOfRange("selection.extend_workload.beta", o.extend_workload_beta, "in [0, 1]");
  }
  if (!In(o.extend_workload_leaving_beta, 0, 1)) {
    return OutOfRange("selection.extend_workload.leaving_beta", o.extend_workload_leaving_beta,
                      "in [0, 1]");
  }
  if (!(o.max_workload_factor >= 1) || !std::isfinite(o.max_workload_factor)) {
    return OutOfRange("selection.extend_workload.max_factor", o.max_workload_factor, ">= 1");
  }
  if (!In(o.update_dropout_low, 0, o.update_dropout_high) || !(o.update_dropout_high < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "selection.extend_workload: need 0 <= dropout_low <= dropout_high < 1, got dropout_low ",
        o.update_dropout_low, ", dropout_high ", o.update_dropout_high));
  }
  if (!(o.round_deadline_s > 0) || !std::isfinite(o.round_deadline_s)) {
    return OutOfRange("round_deadline_s", o.round_deadline_s, "> 0");
  }
  if (o.batch_size < 1) return OutOfRange("training.batch_size", o.batch_size, ">= 1");
  if (o.local_steps < 0) return OutOfRange("training.local_steps", o.local_steps, ">= 0");
  if (o.local_epochs < 1) return OutOfRange("training.local_epochs", o.local_epochs, ">= 1");
  if (o.fit.min_batch_size < 1 || o.fit.min_batch_size > o.batch_size) {
    return OutOfRange("selection.fit.min_batch_size", o.fit.min_batch_size,
                      "in [1, training.batch_size]");
  }
  if (!In(o.fit.margin, 0, 1e6)) return OutOfRange("selection.fit.margin", o.fit.margin, ">= 0");
  if (!In(o.fit.predictor.learning_rate, 0, 1) || o.fit.predictor.learning_rate == 0) {
    return OutOfRange("selection.fit.learning_rate", o.fit.predictor.learning_rate, "in (0, 1]");
  }
  if (!In(o.min_online_probability, 0, 1)) {
    return OutOfRange("selection.min_online_probability", o.min_online_probability, "in [0, 1]");
  }
  if (!In(o.leaving_first.window_s, 0, 1e9)) {
    return OutOfRange("selection.leaving_first.window_s", o.leaving_first.window_s,
                      "in [0, 1e9] seconds");
  }
  if (o.leaving_first.cooldown_rounds < 0) {
    return OutOfRange("selection.leaving_first.cooldown_rounds", o.leaving_first.cooldown_rounds,
                      ">= 0");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidatePlannerOptions(const PlannerOptions& o) {
  if (o.clients_per_round < 1) return OutOfRange("clients_per_round", o.clients_per_round, ">= 1");
  if (!(o.overcommit >= 1) || !std::isfinite(o.overcommit) ||
      o.clients_per_round * o.overcommit > 1e8) {
    return OutOfRange("selection.overcommit", o.overcommit, ">= 1 (and K x overcommit <= 1e8)");
  }
  FEDSCHED_RETURN_IF_ERROR(ValidateOort(o.oort));
  FEDSCHED_RETURN_IF_ERROR(ValidateFedCaseAndCache(o.fedcase, o.cache));
  if (o.compression.levels.empty() || o.compression.levels.size() > kMaxCompressionLevels) {
    return OutOfRange("compression.levels (count)",
                      static_cast<double>(o.compression.levels.size()),
                      absl::StrCat("in [1, ", kMaxCompressionLevels, "]"));
  }
  return ValidateRoundAndTraining(o);
}

LeavingFirstOptions LeavingFirstOptions::FromConfig(const v1::LeavingFirstConfig& c) {
  LeavingFirstOptions o;
  o.enabled = c.enable();
  o.window_s = c.window_s();
  o.cooldown_rounds = c.cooldown_rounds();
  return o;
}

OortOptions OortOptions::FromConfig(const v1::OortConfig& c) {
  OortOptions o;
  o.exploration_factor = OrDefault(c.exploration_factor(), o.exploration_factor);
  o.exploration_decay = OrDefault(c.exploration_decay(), o.exploration_decay);
  o.exploration_min = OrDefault(c.exploration_min(), o.exploration_min);
  o.round_threshold = OrDefault(c.round_threshold(), o.round_threshold);
  o.round_penalty = OrDefault(c.round_penalty(), o.round_penalty);
  o.clip_bound = OrDefault(c.clip_bound(), o.clip_bound);
  o.cut_off_util = OrDefault(c.cut_off_util(), o.cut_off_util);
  o.pacer_step = OrDefault(c.pacer_step(), o.pacer_step);
  o.pacer_delta = OrDefault(c.pacer_delta(), o.pacer_delta);
  o.sample_window = OrDefault(c.sample_window(), o.sample_window);
  o.resume_exploration = c.resume_exploration();
  o.hold_round_threshold = c.hold_round_threshold();
  return o;
}

FedCaseOptions FedCaseOptions::FromConfig(const v1::FedCaseConfig& c) {
  FedCaseOptions o;
  o.top_ratio = OrDefault(c.top_ratio(), o.top_ratio);
  o.speed_weight = OrDefault(c.speed_weight(), o.speed_weight);
  if (c.base_policy() != v1::FedCaseConfig::BASE_POLICY_UNSPECIFIED) {
    o.base_policy = c.base_policy();
  }
  return o;
}

CachePlanOptions CachePlanOptions::FromConfig(const v1::CacheConfig& c) {
  CachePlanOptions o;
  if (c.policy() != v1::CACHE_POLICY_UNSPECIFIED) o.policy = c.policy();
  o.policy_name = c.policy_name();
  o.capacity_fraction = OrDefault(c.capacity_fraction(), o.capacity_fraction);
  o.replication_factor = OrDefault(c.replication_factor(), o.replication_factor);
  o.prefetch = !c.disable_prefetch();
  return o;
}

FitOptions FitOptions::FromConfig(const v1::FitConfig& c) {
  FitOptions o;
  o.enabled = !c.disable();
  o.min_batch_size = OrDefault(c.min_batch_size(), o.min_batch_size);
  o.margin = OrDefault(c.margin(), o.margin);
  o.predictor.learning_rate = OrDefault(c.learning_rate(), o.predictor.learning_rate);
  return o;
}

absl::StatusOr<PlannerOptions> PlannerOptions::FromServerConfig(const v1::ServerConfig& raw) {
  v1::ServerConfig config = raw;
  FEDSCHED_ASSIGN_OR_RETURN(const SelectionPolicyKind* kind, ResolveSelectionPolicy(&config));
  const v1::SelectionConfig& sel = config.selection();
  const v1::TrainingConfig& tr = config.training();
  PlannerOptions o;
  if (sel.policy() != v1::SELECTION_POLICY_UNSPECIFIED) o.policy = sel.policy();
  o.policy_name = sel.policy_name();
  o.policy_config = sel.policy_config();
  if (config.clients_per_round() < 0) {
    return OutOfRange("clients_per_round", config.clients_per_round(), ">= 0 (0 = 10)");
  }
  o.clients_per_round = OrDefault(config.clients_per_round(), o.clients_per_round);
  o.overcommit = OrDefault(sel.overcommit(), o.overcommit);
  o.oort = OortOptions::FromConfig(sel.oort());
  o.fedcase = FedCaseOptions::FromConfig(sel.fedcase());
  o.cache = CachePlanOptions::FromConfig(config.cache());
  o.workload_sizing = sel.workload_sizing();
  o.min_local_steps = OrDefault(sel.min_local_steps(), o.min_local_steps);
  o.min_online_probability = OrDefault(sel.min_online_probability(), o.min_online_probability);
  const v1::WorkloadExtensionConfig& ext = sel.extend_workload();
  const WorkloadDefaults defaults = kind->workload_defaults();
  o.extend_workload_beta = ext.disable() ? 0.0 : OrDefault(ext.beta(), defaults.extend_beta);
  o.extend_workload_leaving_beta = ext.disable() ? 0.0 : ext.leaving_beta();
  o.max_workload_factor = OrDefault(ext.max_factor(), o.max_workload_factor);
  if (!ext.disable_dropout()) {
    o.update_dropout_low = OrDefault(ext.dropout_low(), defaults.dropout_low);
    o.update_dropout_high = OrDefault(ext.dropout_high(), defaults.dropout_high);
  }
  if (config.round_closing() != v1::ROUND_CLOSING_UNSPECIFIED) {
    o.round_closing = config.round_closing();
  }
  o.round_deadline_s = OrDefault(config.round_deadline_s(), o.round_deadline_s);
  o.batch_size = OrDefault(tr.batch_size(), o.batch_size);
  o.local_steps = tr.local_steps();
  o.local_epochs = OrDefault(tr.local_epochs(), o.local_epochs);
  o.max_local_steps = OrDefault(tr.max_local_steps(), o.max_local_steps);
  o.seed = OrDefault<uint64_t>(config.seed(), o.seed);
  o.fit = FitOptions::FromConfig(sel.fit());
  o.leaving_first = LeavingFirstOptions::FromConfig(sel.leaving_first());
  FEDSCHED_ASSIGN_OR_RETURN(o.compression, CompressionOptions::FromConfig(config.compression()));
  FEDSCHED_RETURN_IF_ERROR(ValidatePlannerOptions(o));
  return o;
}

}  // namespace fedsched::planner
