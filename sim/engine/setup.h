// Building a simulation from a SimConfig (configs/sim/*.textproto): the traces, the selector
// (server/planner or the built-in random policy), the learner (real training or the no-train
// modelled curve) and the Simulator.
#ifndef FEDSCHED_SIM_ENGINE_SETUP_H_
#define FEDSCHED_SIM_ENGINE_SETUP_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "fedsched/v1/sim.pb.h"
#include "sim/engine/adapters.h"
#include "sim/engine/simulator.h"
#include "sim/trace/availability_trace.h"
#include "sim/trace/capacity_trace.h"

namespace fedsched::sim {

// `config` with every zero field set to its documented default (sim.proto comments).
// Errors: INVALID_ARGUMENT naming the field for an out-of-range value (negative counts,
// overcommit < 1, min_updates > K, accuracy outside [0, 1], builtin_selector with a policy other
// than random, ...).
absl::StatusOr<v1::SimConfig> ResolveSimConfig(const v1::SimConfig& config);

// All parts of one run. Members are declared in dependency order.
struct Simulation {
  v1::SimConfig config;  // resolved
  std::unique_ptr<CapacityTrace> capacity;
  std::unique_ptr<AvailabilityTrace> availability;
  std::unique_ptr<ParticipantSelector> selector;
  std::unique_ptr<Learner> learner;
  std::unique_ptr<Simulator> simulator;
  std::string run_name;  // config.run_name or the policy name
};

// Loads the traces and builds every part: the selector is server/planner's Planner
// (PlannerSelector) unless builtin_selector is set. Errors: those of ResolveSimConfig, the trace
// loaders (file:line), data loading / partitioning, and PlannerSelector::Create.
absl::StatusOr<std::unique_ptr<Simulation>> BuildSimulation(const v1::SimConfig& config);

// Lower-case policy name: "random", "oort", "fedcase".
std::string PolicyName(v1::SelectionPolicy policy);

}  // namespace fedsched::sim

#endif  // FEDSCHED_SIM_ENGINE_SETUP_H_
