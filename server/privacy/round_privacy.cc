#include "server/privacy/round_privacy.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "server/aggregation/aggregation_rule_registry.h"
#include "server/planner/policy_registry.h"
#include "server/privacy/rdp_accountant.h"

namespace fedsched::privacy {
namespace {

constexpr char kClipTensor[] = "__privacy__/clip_norm";
constexpr char kRoundsTensor[] = "__privacy__/rounds";

absl::Status Refuse(const std::string& where, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

int64_t ExpectedCohort(const v1::ServerConfig& config) {
  return static_cast<int64_t>(
      std::ceil(config.clients_per_round() * config.selection().overcommit() - 1e-9));
}

// The combinations whose privacy the accountant cannot vouch for (see the header).
absl::Status CheckCompatible(const std::string& where, const v1::ServerConfig& config) {
  FEDSCHED_ASSIGN_OR_RETURN(const planner::SelectionPolicyKind* policy,
                            planner::ConfiguredSelectionPolicy(config.selection()));
  if (!policy->samples_uniformly()) {
    return Refuse(where, absl::StrCat("privacy needs a selection policy that samples uniformly "
                                      "(SELECTION_POLICY_RANDOM), got \"",
                                      policy->name(),
                                      "\": it does not pick every client with the same "
                                      "probability, so the accountant's amplification by "
                                      "uniform sampling does not hold"));
  }
  const v1::AggregationConfig& agg = config.aggregation();
  if (agg.async_fedbuff()) {
    return Refuse(where,
                  "privacy cannot run with aggregation.async_fedbuff: an update may land in any "
                  "later version, so rounds are not independently sampled");
  }
  absl::StatusOr<AggregationRuleProperties> rule = AggregationRulePropertiesOf(agg);
  if (!rule.ok()) return Refuse(where, std::string(rule.status().message()));
  if (!rule->composes_with_dp) {
    return Refuse(where,
                  absl::StrCat("privacy needs FedAvg or a FedOpt rule, got aggregation.rule ",
                               AggregationRuleDisplayName(agg),
                               ": the noise is calibrated to the clipped sum's sensitivity, "
                               "which a robust rule does not compute"));
  }
  if (config.selection().extend_workload().dropout_high() > 0 &&
      !config.selection().extend_workload().disable_dropout()) {
    return Refuse(where,
                  "privacy cannot run with selection.extend_workload update dropout: a dropped "
                  "tensor carries no noise");
  }
  if (config.audit_updates()) {
    return Refuse(where,
                  "privacy cannot run with audit_updates: fedsched-audit replays rounds "
                  "from the stored updates and cannot reproduce the noise");
  }
  const v1::HierarchyConfig::Role role = config.hierarchy().role();
  if (role != v1::HierarchyConfig::ROLE_UNSPECIFIED && role != v1::HierarchyConfig::ROLE_FLAT) {
    return Refuse(where,
                  "privacy needs hierarchy.role ROLE_FLAT: aggregators' partial sums are "
                  "not clipped with uniform weights");
  }
  return absl::OkStatus();
}

absl::Status CheckRange(const std::string& where, const char* field, double value, double lo,
                        double hi, bool lo_open, bool hi_open) {
  const bool ok = std::isfinite(value) && (lo_open ? value > lo : value >= lo) &&
                  (hi_open ? value < hi : value <= hi);
  if (ok) return absl::OkStatus();
  return Refuse(where, absl::StrCat("privacy.", field, " must be in ", lo_open ? "(" : "[", lo,
                                    ", ", hi, hi_open ? ")" : "]", ", got ", value));
}

}  // namespace

bool PrivacyEnabled(const v1::ServerConfig& config) {
  const v1::PrivacyConfig::Mode mode = config.privacy().mode();
  return mode == v1::PrivacyConfig::MODE_CENTRAL || mode == v1::PrivacyConfig::MODE_DISTRIBUTED;
}

double SamplingRate(const v1::ServerConfig& config) {
  const int64_t n = config.privacy().population_size();
  if (n <= 0) return 1.0;
  return std::min(1.0, static_cast<double>(ExpectedCohort(config)) / static_cast<double>(n));
}

absl::Status ResolvePrivacyConfig(const std::string& where, v1::ServerConfig& config) {
  v1::PrivacyConfig& p = *config.mutable_privacy();
  if (p.mode() == v1::PrivacyConfig::MODE_UNSPECIFIED) p.set_mode(v1::PrivacyConfig::MODE_NONE);
  if (!PrivacyEnabled(config)) return absl::OkStatus();
  FEDSCHED_RETURN_IF_ERROR(CheckCompatible(where, config));
  constexpr double kMax = 1e9;
  FEDSCHED_RETURN_IF_ERROR(
      CheckRange(where, "noise_multiplier", p.noise_multiplier(), 0, kMax, true, false));
  if (p.clip_norm() == 0) p.set_clip_norm(1.0);
  FEDSCHED_RETURN_IF_ERROR(CheckRange(where, "clip_norm", p.clip_norm(), 0, kMax, true, false));
  const int64_t cohort = ExpectedCohort(config);
  if (p.population_size() < cohort) {
    return Refuse(where, absl::StrCat("privacy.population_size (N, the clients that could be "
                                      "sampled) is required and must be >= ceil(K x overcommit) = ",
                                      cohort, ", got ", p.population_size()));
  }
  if (p.delta() == 0) {
    p.set_delta(std::min(1e-5, std::pow(static_cast<double>(p.population_size()), -1.1)));
  }
  FEDSCHED_RETURN_IF_ERROR(CheckRange(where, "delta", p.delta(), 0, 1, true, true));
  FEDSCHED_RETURN_IF_ERROR(
      CheckRange(where, "target_epsilon", p.target_epsilon(), 0, kMax, false, false));
  if (!p.adaptive_clipping()) return absl::OkStatus();
  if (p.target_quantile() == 0) p.set_target_quantile(0.5);
  FEDSCHED_RETURN_IF_ERROR(
      CheckRange(where, "target_quantile", p.target_quantile(), 0, 1, true, true));
  if (p.clip_learning_rate() == 0) p.set_clip_learning_rate(0.2);
  FEDSCHED_RETURN_IF_ERROR(
      CheckRange(where, "clip_learning_rate", p.clip_learning_rate(), 0, kMax, true, false));
  if (p.clipped_count_stddev() == 0) {
    p.set_clipped_count_stddev(std::max(config.clients_per_round() / 20.0, p.noise_multiplier()));
  }
  absl::StatusOr<double> split =
      SplitNoiseMultiplier(p.noise_multiplier(), p.clipped_count_stddev());
  if (!split.ok()) return Refuse(where, absl::StrCat("privacy: ", split.status().message()));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<RoundPrivacy>> RoundPrivacy::Create(const v1::ServerConfig& config) {
  if (!PrivacyEnabled(config)) {
    return absl::InvalidArgumentError("RoundPrivacy: privacy.mode is NONE");
  }
  const v1::PrivacyConfig& p = config.privacy();
  std::unique_ptr<RoundPrivacy> out(new RoundPrivacy());
  out->central_ = p.mode() == v1::PrivacyConfig::MODE_CENTRAL;
  out->adaptive_ = p.adaptive_clipping();
  out->noise_multiplier_ = p.noise_multiplier();
  out->update_multiplier_ = p.noise_multiplier();
  if (out->adaptive_) {
    FEDSCHED_ASSIGN_OR_RETURN(out->update_multiplier_,
                              SplitNoiseMultiplier(p.noise_multiplier(), p.clipped_count_stddev()));
    out->adaptive_params_ = {.target_quantile = p.target_quantile(),
                             .learning_rate = p.clip_learning_rate(),
                             .count_stddev = p.clipped_count_stddev(),
                             .expected_clients = static_cast<double>(config.clients_per_round())};
  }
  out->q_ = SamplingRate(config);
  out->delta_ = p.delta();
  out->target_epsilon_ = p.target_epsilon();
  out->denominator_ = static_cast<double>(config.clients_per_round());
  out->min_updates_ = std::max(1, config.min_updates());
  out->clip_norm_ = p.clip_norm();
  return out;
}

double RoundPrivacy::client_noise_stddev() const {
  if (central_) return 0.0;
  return sum_noise_stddev() / std::sqrt(static_cast<double>(min_updates_));
}

absl::StatusOr<double> RoundPrivacy::EpsilonAfter(int64_t rounds) const {
  if (rounds == 0) return 0.0;
  return privacy::EpsilonAfter(q_, noise_multiplier_, rounds, delta_);
}

bool RoundPrivacy::BudgetExhausted() const {
  if (target_epsilon_ <= 0) return false;
  absl::StatusOr<double> next = EpsilonAfter(rounds_ + 1);
  return !next.ok() || *next > target_epsilon_;
}

absl::StatusOr<RoundPrivacyReport> RoundPrivacy::FinishRound(int64_t unclipped, uint64_t seed) {
  RoundPrivacyReport report;
  FEDSCHED_ASSIGN_OR_RETURN(report.epsilon, EpsilonAfter(rounds_ + 1));
  report.delta = delta_;
  report.clip_norm = clip_norm_;
  report.noise_stddev = sum_noise_stddev();
  if (adaptive_) {
    report.unclipped_fraction = NoisedUnclippedFraction(adaptive_params_, unclipped, seed);
    clip_norm_ = NextClipNorm(adaptive_params_, clip_norm_, report.unclipped_fraction);
  }
  ++rounds_;
  return report;
}

void RoundPrivacy::SaveState(v1::Model* state) const {
  for (auto [name, value] : {std::pair<const char*, double>{kClipTensor, clip_norm_},
                             {kRoundsTensor, static_cast<double>(rounds_)}}) {
    v1::Tensor* t = state->add_tensors();
    t->set_name(name);
    t->add_data(static_cast<float>(value));
  }
}

absl::Status RoundPrivacy::ExtractState(v1::Model* state) {
  auto* tensors = state->mutable_tensors();
  for (int i = tensors->size() - 1; i >= 0; --i) {
    const v1::Tensor& t = tensors->Get(i);
    const bool clip = t.name() == kClipTensor;
    if (!clip && t.name() != kRoundsTensor) continue;
    if (t.data_size() != 1 || !(t.data(0) >= 0) || !std::isfinite(t.data(0)) ||
        (clip && !(t.data(0) > 0))) {
      return absl::InvalidArgumentError(
          absl::StrCat("restored privacy state '", t.name(), "' is not a valid scalar"));
    }
    if (clip) {
      clip_norm_ = t.data(0);
    } else {
      rounds_ = static_cast<int64_t>(std::llround(t.data(0)));
    }
    tensors->DeleteSubrange(i, 1);
  }
  return absl::OkStatus();
}

std::string CsvCells(const v1::RoundRecord& record) {
  return absl::StrFormat("%.6f,%.3g,%.6f", record.dp_epsilon(), record.dp_delta(),
                         record.dp_clip_norm());
}

}  // namespace fedsched::privacy
