// The planner's options: selection (random, Oort, FedCaSe), cache plans, workload sizing,
// deadlines and local work, read from ServerConfig with every documented default applied.
// Included by planner.h, which is the header callers use.
#ifndef FEDSCHED_SERVER_PLANNER_PLANNER_OPTIONS_H_
#define FEDSCHED_SERVER_PLANNER_PLANNER_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fedsched/v1/config.pb.h"
#include "server/fit/memory_predictor.h"
#include "server/planner/compression_levels.h"
#include "server/profile/round_time.h"

namespace fedsched::planner {

// Oort knobs, defaults pinned to FedScale's (docs/ALGORITHMS.md §3; config.proto OortConfig).
struct OortOptions {
  // Initial exploration factor epsilon, in [0, 1]. Default: 0.9.
  double exploration_factor = 0.9;
  // epsilon *= this after every committed round, in (0, 1]. Default: 0.98.
  double exploration_decay = 0.98;
  // Floor of epsilon, in [0, 1]. Default: 0.3.
  double exploration_min = 0.3;
  // Initial percentile of tried clients' predicted durations that sets T, percent in (0, 100].
  // Default: 30.
  double round_threshold = 30;
  // alpha in the speed penalty (T / t)^alpha, >= 0. Default: 2.
  double round_penalty = 2;
  // Quantile at which utilities are clipped, in (0, 1]. Default: 0.9.
  double clip_bound = 0.9;
  // Exploit only among scores >= cut_off_util x the exploit_len-th best score, >= 0.
  // Default: 0.05.
  double cut_off_util = 0.05;
  // Committed rounds per pacer window, >= 1. Default: 20.
  int32_t pacer_step = 20;
  // Pacer step, percentage points, in (0, 100]. Default: 5.
  double pacer_delta = 5;
  // Explore among the sample_window x explore_len never-tried clients with the largest
  // weight, >= 1. Default: 5.
  int32_t sample_window = 5;
  // false: Oort's rule, exploration stops for good once every registered client has been
  // tried. true (fedsched's own): it never stops, so clients who register later (a live
  // server's new devices) are still explored (docs/ALGORITHMS.md §3.4). Default: false.
  bool resume_exploration = false;
  // false: Oort's pacer moves T's percentile. true (fedsched's own): it stays at round_threshold
  // for the whole run (docs/ALGORITHMS.md §3.5). Default: false.
  bool hold_round_threshold = false;

  // Zero fields of `config` take the defaults above.
  static OortOptions FromConfig(const v1::OortConfig& config);
};

// FedCaSe knobs (docs/ALGORITHMS.md §4; config.proto FedCaseConfig).
struct FedCaseOptions {
  // 0: the ratio of K joined by experience is learned (TopRatioLearner, as FedCaSe's review
  // code); > 0: a fixed ratio instead (fedsched's option; floor(top_ratio x K) clients).
  // Default: 0 (learned).
  double top_ratio = 0;
  // Weight of normalised speed in experience; utility gets the rest. In [0, 1]. Default: 0.1.
  double speed_weight = 0.1;
  // The set the top clients are joined with: Oort's selection or uniform random
  // (docs/ALGORITHMS.md §4: the over-committed random or Oort set; Oort pinned, see
  // config.proto). Default: BASE_POLICY_OORT (also for UNSPECIFIED).
  v1::FedCaseConfig::BasePolicy base_policy = v1::FedCaseConfig::BASE_POLICY_OORT;
  // Zero fields of `config` take the defaults above.
  static FedCaseOptions FromConfig(const v1::FedCaseConfig& config);
};

// The server-wide defaults of every task's cache plan (config.proto CacheConfig;
// docs/ALGORITHMS.md §4).
struct CachePlanOptions {
  // Default: CACHE_POLICY_IMPORTANCE (also for UNSPECIFIED).
  v1::CachePolicy policy = v1::CACHE_POLICY_IMPORTANCE;
  // The policy by its registered name (client/cache/cache_policy.h); when non-empty it replaces
  // `policy`. Default: "".
  std::string policy_name;
  // wss: the cached share of the client's samples, in (0, 1]. Default: 0.1.
  double capacity_fraction = 0.1;
  // r: times a cache hit is reused within a round, >= 0. Default: 0 = FedCaSe's adaptive factor,
  // chosen by the device each round from its cache hits (docs/ALGORITHMS.md §4.5); >= 1 fixes r
  // (an option).
  int32_t replication_factor = 0;
  // Name the clients expected next round (RoundPlan::expected_next). Default: true.
  bool prefetch = true;
  // Zero fields of `config` take the defaults above; prefetch = !disable_prefetch.
  static CachePlanOptions FromConfig(const v1::CacheConfig& config);
};

// Resource fit (docs/ALGORITHMS.md §8; config.proto FitConfig): whether a candidate's predicted
// peak memory is checked against its declared budget, and how.
struct FitOptions {
  // Check memory budgets: lower a candidate's batch until it fits, or pass it over.
  // Default: true (config: !fit.disable).
  bool enabled = true;
  // Smallest batch a candidate may be given, in [1, batch_size]. Default: 1.
  int32_t min_batch_size = 1;
  // A task fits when predicted peak x (1 + margin) <= budget, margin >= 0. Default: 0.1.
  double margin = 0.1;
  fit::MemoryPredictorOptions predictor;
  // The model's memory features. Not in the config: the round engine fills them from the
  // model it serves (EngineOptions::model_features). parameters == 0: nothing is predicted and
  // every candidate fits. Default: zeros.
  fit::ModelFeatures model;
  // Zero fields of `config` take the defaults above.
  static FitOptions FromConfig(const v1::FitConfig& config);
};

// Leaving first (REFL's intelligent participant selection, Abdelmoniem et al., EuroSys 2023,
// §4.1; docs/ALGORITHMS.md §2.7; config.proto LeavingFirstConfig): candidates narrowed before
// the policy selects (NarrowToLeavingFirst, leaving_first.h).
struct LeavingFirstOptions {
  // Narrow the candidates before selection. Default: false.
  bool enabled = false;
  // W, seconds, >= 0: the length of "the coming round" the leaving test looks ahead by; 0 = the
  // previous round's length (plan to close), as REFL's Oort mode takes it. Default: 0.
  double window_s = 0;
  // Rounds a selected client sits out: a client selected in round r is not preferred before
  // round r + cooldown_rounds (REFL's prohibit_reselect; 5 in its runs), >= 0; 0 = none.
  // Default: 0.
  int32_t cooldown_rounds = 0;
  // Zero fields of `config` take the defaults above.
  static LeavingFirstOptions FromConfig(const v1::LeavingFirstConfig& config);
};

// Everything the planner is configured with: the policy and its knobs, K and over-commitment,
// deadlines and closing (docs/ALGORITHMS.md §2), local work and workload sizing (§2), the cache
// plan defaults (§4), the seed and the predictor (§1). Checked by ValidatePlannerOptions.
struct PlannerOptions {
  // The built-in policy, when policy_name is empty. Default: SELECTION_POLICY_RANDOM (also for
  // UNSPECIFIED).
  v1::SelectionPolicy policy = v1::SELECTION_POLICY_RANDOM;
  // A registered policy's name (policy_registry.h), which then takes precedence over `policy`.
  // Default: "" (`policy` selects).
  std::string policy_name;
  // The policy's own config (selection.policy_config), for a policy that reads it at creation
  // (SelectionPolicyKind::Create). Default: empty.
  google::protobuf::Any policy_config;
  // K: updates a round waits for, >= 1. Default: 10.
  int32_t clients_per_round = 10;
  // ceil(K x overcommit) tasks per round, >= 1. Default: 1.3 (FedScale).
  double overcommit = 1.3;
  OortOptions oort;
  FedCaseOptions fedcase;
  CachePlanOptions cache;
  // Lower a slow client's local steps so that its predicted seconds fit
  // workload_fit_fraction x round_deadline_s. Default: false.
  bool workload_sizing = false;
  // Sizing never goes below this many local steps (nor above the configured ones), >= 1.
  // Default: 1.
  int32_t min_local_steps = 1;
  // Share of the deadline a sized workload is predicted to take (a margin for prediction
  // error), in (0, 1]. Default: 0.9.
  double workload_fit_fraction = 0.9;
  // Workload extension (PyramidFL's adaptive local iterations; docs/ALGORITHMS.md §10): share
  // of a participant's predicted idle time before the round's expected close filled with extra
  // local steps, in [0, 1]; 0 = off. Default: 0, or the policy's
  // (SelectionPolicyKind::workload_defaults: 0.5 under pyramidfl; fedsched's preset sets 0.5).
  double extend_workload_beta = 0;
  // The share for a participant about to leave (PredictedLeaving over leaving_first's window),
  // in [0, 1]; 0 = extend_workload_beta for every participant
  // (WorkloadExtensionConfig.leaving_beta). Default: 0.
  double extend_workload_leaving_beta = 0;
  // An extended task has at most this multiple of its planned steps, >= 1. Default: 11.
  double max_workload_factor = 11;
  // Update dropout (PyramidFL; WorkloadExtensionConfig.dropout_low / dropout_high): the
  // probability each participant drops each tensor of its update, by utility rank, in
  // [low, high]; high = 0 is off. Default: off, or the policy's (0.1 and 0.6 under pyramidfl).
  double update_dropout_low = 0;
  double update_dropout_high = 0;
  // Only forecast by the planner (ForecastClosing); the service closes rounds.
  // Default: ROUND_CLOSING_FIRST_K (also for UNSPECIFIED).
  v1::RoundClosing round_closing = v1::ROUND_CLOSING_FIRST_K;
  // The round's hard deadline in both closing modes, seconds, > 0. Default: 120.
  double round_deadline_s = 120;
  // Samples per local step, >= 1. Default: 32.
  int32_t batch_size = 32;
  // Local steps per task, >= 0; 0 = local_epochs x ceil(num_samples / batch_size).
  // Default: 0.
  int32_t local_steps = 0;
  // Epochs per task when local_steps is 0, >= 1. Default: 1.
  int32_t local_epochs = 1;
  // Upper bound on any task's local steps, whatever num_samples a client declared
  // (docs/guides/SECURITY.md). Default: 1000.
  int32_t max_local_steps = 1000;
  // Seeds the selection randomness, together with the round and the attempt. Default: 1.
  uint64_t seed = 1;
  // A candidate whose AvailabilityOracle probability is below this is not selected, in
  // [0, 1] (selection.min_online_probability). Default: 0.5.
  double min_online_probability = 0.5;
  LeavingFirstOptions leaving_first;
  profile::RoundTimePredictorOptions predictor;
  FitOptions fit;
  // Update compression (ServerConfig.compression): the upload each participant is charged with
  // and, when adaptive, the ladder it is given a level of (docs/ALGORITHMS.md §13).
  CompressionOptions compression;

  // Reads ServerConfig (selection, cache, training, clients_per_round, round_deadline_s,
  // round_closing, seed, compression), applying every documented default for zero fields, the
  // policy's preset and its workload defaults (planner::ResolveSelectionPolicy, so an unresolved
  // config plans as its resolved form). Errors: INVALID_ARGUMENT naming the field when a value is
  // out of range, or those of ResolveSelectionPolicy (an unknown policy, a config it refuses).
  [[nodiscard]] static absl::StatusOr<PlannerOptions> FromServerConfig(
      const v1::ServerConfig& config);
};

// Checks every field of `options` against the range documented above (the predictor's options
// are checked by RoundTimePredictor::Create). Errors: INVALID_ARGUMENT naming the first field
// out of range, as "<config path> must be <range>, got <value>".
[[nodiscard]] absl::Status ValidatePlannerOptions(const PlannerOptions& options);

}  // namespace fedsched::planner

#endif  // FEDSCHED_SERVER_PLANNER_PLANNER_OPTIONS_H_
