// Building a simulation from a SimConfig (configs/sim/*.textproto): the resolved config, the
// traces, the learner (real training or the no-train modelled curve) and the Simulator, which
// drives the server's round engine (docs/ARCHITECTURE.md "The round engine").
#ifndef FEDSCHED_SIM_ENGINE_SETUP_H_
#define FEDSCHED_SIM_ENGINE_SETUP_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "fedsched/v1/sim.pb.h"
#include "sim/engine/learner.h"
#include "sim/engine/simulator.h"
#include "sim/trace/availability_trace.h"
#include "sim/trace/capacity_trace.h"

namespace fedsched::sim {

// `config` with `server` resolved by round::ResolveRoundConfig (the server's defaults, e.g.
// K = 10, round_deadline_s 120, min_online_clients = min_updates; errors name
// "sim config: server: <field>") and every zero sim-only field set to its documented default
// (sim.proto comments). Errors: INVALID_ARGUMENT naming the field for an out-of-range value:
// negative counts, clients_per_round > num_clients, target_accuracy outside [0, 1],
// server.num_rounds 0 with neither target_accuracy nor max_virtual_hours (the run would never
// stop; allowed with a job_trace_path, whose jobs stop by their specs), a missing
// traces.capacity_path, a trainer other than "reference" / "torch" (default "reference"),
// "torch" with a server.model.architecture other than "cnn", a round_trip_s
// that is negative or not finite, ...
[[nodiscard]] absl::StatusOr<v1::SimConfig> ResolveSimConfig(const v1::SimConfig& config);

// SimConfig.round_trip_s when unset: 100 ms, a device-server round trip on a mobile link.
inline constexpr double kDefaultRoundTripS = 0.1;

// All parts of one run. Members are declared in dependency order.
struct Simulation {
  v1::SimConfig config;  // resolved
  std::unique_ptr<CapacityTrace> capacity;
  std::unique_ptr<AvailabilityTrace> availability;
  std::unique_ptr<Learner> learner;
  std::unique_ptr<Simulator> simulator;
  std::string run_name;  // config.run_name, or RunName(config)
};

// Makes the learner of a run with real training from the resolved config (a distributed run,
// sim/mpi, passes its own; the default is TrainingLearner::Create).
using LearnerFactory =
    std::function<absl::StatusOr<std::unique_ptr<Learner>>(const v1::SimConfig& resolved)>;

// The learner of the resolved config `c`: ModelledLearner under no_train, else `make_learner`
// (by default TrainingLearner::Create). Errors: those of MakeCachePolicy, data loading /
// partitioning (or `make_learner`).
[[nodiscard]] absl::StatusOr<std::unique_ptr<Learner>> MakeLearner(
    const v1::SimConfig& c, const LearnerFactory& make_learner = nullptr);

// Loads the traces and builds every part (ModelledLearner under no_train, else
// `make_learner`, by default TrainingLearner; durations from the capacity trace). Errors: those
// of ResolveSimConfig, the trace loaders (file:line), data loading / partitioning (or
// `make_learner`), and Simulator::Create.
[[nodiscard]] absl::StatusOr<std::unique_ptr<Simulation>> BuildSimulation(
    const v1::SimConfig& config, const LearnerFactory& make_learner = nullptr);

// Reads a SimConfig in protobuf text format from `path` (unknown keys are errors) and
// resolves its trace paths (traces.capacity_path, sample_size_path, availability_path,
// availability_windows_path) and job_trace_path relative to the directory of `path` when they
// are relative, so a config runs from any working directory. Other paths (output_csv, data)
// are left as given. Errors: those of LoadTextConfig; NOT_FOUND for a trace file that does
// not exist, naming the field, the path as given and as resolved.
[[nodiscard]] absl::StatusOr<v1::SimConfig> LoadSimConfig(const std::string& path);

// fedsched-sim's --set: a SimConfig fragment in protobuf text format (e.g.
// `traces { start_time_s: 86400 } server { selection { extend_workload { beta: 0.5 } } }`)
// merged over `config` as Message::MergeFrom does: every field the fragment sets to a non-default
// value replaces the config's, repeated fields are appended, and a field cannot be set back to
// its default (0, false, ""). Paths in the fragment are used as given (relative to the current
// directory). Errors: INVALID_ARGUMENT naming the line, column and unknown or malformed key;
// `config` is then unchanged.
[[nodiscard]] absl::Status ApplyConfigOverride(const std::string& fragment, v1::SimConfig* config);

// fedsched-sim's --policy / --cache_policy / --fedcase_base flags on `config`'s server block.
// Empty strings keep the config's value. `policy` (a registered name: "random" | "oort" |
// "fedcase" | "pyramidfl" | "fedsched" or one a program registered) goes through
// planner::ApplyPolicyFlag, as fedsched-server's --policy: it also sets the cache the policy
// implies (fedcase: importance, the others LRU, as FedCaSe's evaluation runs them;
// SelectionPolicyKind::implied_cache) unless `cache_policy` (a registered cache policy name,
// client/cache/cache_policy.h: "importance" | "lru" | "lfu" | "none" built in) names one; a
// built-in is set as server.cache.policy, any other as server.cache.policy_name. Errors:
// INVALID_ARGUMENT naming the flag and its allowed values (the registered names).
[[nodiscard]] absl::Status ApplySelectionFlags(const std::string& policy,
                                               const std::string& cache_policy,
                                               const std::string& fedcase_base,
                                               v1::SimConfig* config);

// fedsched-sim's --availability_forecast flag: "trace" | "learned" | "none" sets
// config.availability_forecast (sim.proto AvailabilityForecast); empty keeps the config's.
// Errors: INVALID_ARGUMENT naming the flag, its allowed values and the value given.
[[nodiscard]] absl::Status ApplyForecastFlag(const std::string& forecast, v1::SimConfig* config);
// Lower-case availability forecast name: "trace" (also for UNSPECIFIED), "learned", "none".
std::string ForecastName(v1::AvailabilityForecast forecast);

// Lower-case policy name: "random" (also for UNSPECIFIED), "oort", "fedcase", "pyramidfl",
// "fedsched" (planner::SelectionPolicyName).
std::string PolicyName(v1::SelectionPolicy policy);
// Lower-case cache policy name: "importance" (also for UNSPECIFIED, which the server treats
// as importance), "lru", "lfu", "none" (the registered name of the policy answering to it; "?"
// for a value nobody answers to). A config naming its policy by name: CachePolicyNameOf
// (client/cache/cache_policy.h).
std::string CachePolicyName(v1::CachePolicy policy);
// The default run name: the policy's registered name (selection.policy_name or policy), plus
// "-fedbuff" under aggregation.async_fedbuff.
std::string RunName(const v1::SimConfig& config);

}  // namespace fedsched::sim

#endif  // FEDSCHED_SIM_ENGINE_SETUP_H_
