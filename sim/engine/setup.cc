#include "sim/engine/setup.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "sim/engine/builtin.h"
#include "sim/engine/planner_selector.h"
#include "sim/engine/training_learner.h"

namespace fedsched::sim {
namespace {

absl::Status Invalid(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("SimConfig.", field, ": ", what));
}

}  // namespace

std::string PolicyName(v1::SelectionPolicy policy) {
  switch (policy) {
    case v1::SELECTION_POLICY_OORT:
      return "oort";
    case v1::SELECTION_POLICY_FEDCASE:
      return "fedcase";
    default:
      return "random";
  }
}

absl::StatusOr<v1::SimConfig> ResolveSimConfig(const v1::SimConfig& in) {
  v1::SimConfig c = in;
  if (c.num_clients() < 0) return Invalid("num_clients", "must be > 0");
  if (c.num_clients() == 0) c.set_num_clients(1000);
  if (c.clients_per_round() < 0) return Invalid("clients_per_round", "must be > 0");
  if (c.clients_per_round() == 0) c.set_clients_per_round(50);
  if (c.clients_per_round() > c.num_clients()) {
    return Invalid("clients_per_round", "must be <= num_clients");
  }
  if (c.num_rounds() < 0) return Invalid("num_rounds", "must be > 0");
  if (c.num_rounds() == 0) c.set_num_rounds(100);
  if (c.target_accuracy() < 0 || c.target_accuracy() > 1) {
    return Invalid("target_accuracy", "must be in [0, 1]");
  }
  if (c.max_virtual_hours() < 0) return Invalid("max_virtual_hours", "must be >= 0");
  if (c.min_updates() < 0 || c.min_updates() > c.clients_per_round()) {
    return Invalid("min_updates", "must be in [0, clients_per_round]");
  }
  if (c.min_updates() == 0) c.set_min_updates(std::max(1, c.clients_per_round() / 2));
  if (c.round_deadline_s() < 0) return Invalid("round_deadline_s", "must be > 0");
  if (c.round_deadline_s() == 0) c.set_round_deadline_s(3600);
  if (c.round_closing() == v1::ROUND_CLOSING_UNSPECIFIED) {
    c.set_round_closing(v1::ROUND_CLOSING_FIRST_K);
  }
  if (c.min_online_clients() < 0) return Invalid("min_online_clients", "must be >= 0");
  if (c.min_online_clients() == 0) c.set_min_online_clients(c.clients_per_round());

  v1::TrainingConfig* t = c.mutable_training();
  if (t->batch_size() < 0) return Invalid("training.batch_size", "must be > 0");
  if (t->batch_size() == 0) t->set_batch_size(32);
  if (t->local_steps() < 0 || t->local_epochs() < 0) {
    return Invalid("training.local_steps", "must be >= 0");
  }
  if (t->local_epochs() == 0) t->set_local_epochs(1);
  if (t->learning_rate() < 0 || !std::isfinite(t->learning_rate())) {
    return Invalid("training.learning_rate", "must be finite and > 0");
  }
  if (t->learning_rate() == 0) t->set_learning_rate(0.05f);

  v1::SelectionConfig* s = c.mutable_selection();
  if (s->policy() == v1::SELECTION_POLICY_UNSPECIFIED) s->set_policy(v1::SELECTION_POLICY_RANDOM);
  if (s->overcommit() == 0) s->set_overcommit(1.3);
  if (s->overcommit() < 1) return Invalid("selection.overcommit", "must be >= 1");
  if (c.builtin_selector() && s->policy() != v1::SELECTION_POLICY_RANDOM) {
    return Invalid("builtin_selector",
                   absl::StrCat("supports only the random policy, not ", PolicyName(s->policy())));
  }

  v1::CacheConfig* cache = c.mutable_cache();
  if (cache->policy() == v1::CACHE_POLICY_UNSPECIFIED) {
    cache->set_policy(v1::CACHE_POLICY_IMPORTANCE);
  }
  if (cache->capacity_fraction() < 0 || cache->capacity_fraction() > 1) {
    return Invalid("cache.capacity_fraction", "must be in [0, 1]");
  }
  if (cache->capacity_fraction() == 0) cache->set_capacity_fraction(0.1);
  if (cache->replication_factor() < 0) return Invalid("cache.replication_factor", "must be >= 1");
  if (cache->replication_factor() == 0) cache->set_replication_factor(2);

  v1::ModelledCurveConfig* curve = c.mutable_curve();
  if (curve->initial_accuracy() == 0) curve->set_initial_accuracy(0.1);
  if (curve->final_accuracy() == 0) curve->set_final_accuracy(0.85);
  if (curve->initial_loss() == 0) curve->set_initial_loss(2.3);
  if (curve->final_loss() == 0) curve->set_final_loss(0.45);
  if (curve->tau_rounds() == 0) curve->set_tau_rounds(60);
  if (curve->tau_rounds() < 0) return Invalid("curve.tau_rounds", "must be > 0");
  if (c.model_bytes() < 0) return Invalid("model_bytes", "must be >= 0");
  if (c.model_bytes() == 0) c.set_model_bytes(407080);
  if (c.no_train_samples_per_client() < 0) {
    return Invalid("no_train_samples_per_client", "must be > 0");
  }
  if (c.no_train_samples_per_client() == 0) c.set_no_train_samples_per_client(60);
  if (c.seed() == 0) c.set_seed(1);
  if (c.train_threads() < 0) return Invalid("train_threads", "must be >= 1");
  if (c.train_threads() == 0) c.set_train_threads(2);
  if (c.eval().every_n_rounds() < 0) return Invalid("eval.every_n_rounds", "must be >= 1");
  if (c.eval().every_n_rounds() == 0) c.mutable_eval()->set_every_n_rounds(1);
  if (c.traces().capacity_path().empty()) return Invalid("traces.capacity_path", "is required");
  if (c.traces().start_time_s() < 0) return Invalid("traces.start_time_s", "must be >= 0");
  return c;
}

absl::StatusOr<std::unique_ptr<Simulation>> BuildSimulation(const v1::SimConfig& raw) {
  auto sim = std::make_unique<Simulation>();
  FEDSCHED_ASSIGN_OR_RETURN(sim->config, ResolveSimConfig(raw));
  const v1::SimConfig& c = sim->config;
  sim->run_name = c.run_name().empty() ? PolicyName(c.selection().policy()) : c.run_name();
  FEDSCHED_ASSIGN_OR_RETURN(CapacityTrace capacity, CapacityTrace::LoadFromConfig(c.traces()));
  sim->capacity = std::make_unique<CapacityTrace>(std::move(capacity));
  FEDSCHED_ASSIGN_OR_RETURN(AvailabilityTrace availability,
                            AvailabilityTrace::Load(c.traces(), c.num_clients()));
  sim->availability = std::make_unique<AvailabilityTrace>(std::move(availability));

  // The learner first: the workload default depends on the partition sizes.
  const int32_t batch = c.training().batch_size();
  double mean_samples = c.no_train_samples_per_client();
  if (c.no_train()) {
    ModelledLearner::Options lo;
    lo.curve = c.curve();
    lo.num_clients = c.num_clients();
    lo.clients_per_round = c.clients_per_round();
    lo.samples_per_client = c.no_train_samples_per_client();
    lo.batch_size = batch;
    lo.local_steps = 1;  // unused: every task carries its local steps
    lo.model_bytes = c.model_bytes();
    lo.cache_policy = c.cache().policy();
    lo.cache_fraction = c.cache().capacity_fraction();
    lo.replication = c.cache().replication_factor();
    lo.seed = c.seed();
    sim->learner = std::make_unique<ModelledLearner>(lo);
  } else {
    FEDSCHED_ASSIGN_OR_RETURN(std::unique_ptr<TrainingLearner> learner, TrainingLearner::Create(c));
    mean_samples = learner->MeanSamples();
    sim->learner = std::move(learner);
  }
  // Workload per task: local_steps, else local_epochs x ceil(mean samples / batch).
  int32_t local_steps = c.training().local_steps();
  if (local_steps == 0) {
    local_steps = c.training().local_epochs() *
                  static_cast<int32_t>(std::ceil(mean_samples / static_cast<double>(batch)));
  }
  sim->config.mutable_training()->set_local_steps(local_steps);

  if (c.builtin_selector()) {
    BuiltinRandomSelector::Options so;
    so.examples_per_task = static_cast<int64_t>(local_steps) * batch;
    so.model_bytes = sim->learner->ModelBytes();
    so.seed = c.seed();
    sim->selector = std::make_unique<BuiltinRandomSelector>(so);
  } else {
    FEDSCHED_ASSIGN_OR_RETURN(
        sim->selector, PlannerSelector::Create(sim->config, local_steps, sim->learner->ModelBytes(),
                                               sim->availability.get()));
  }

  Simulator::Options o;
  o.num_clients = c.num_clients();
  o.clients_per_round = c.clients_per_round();
  o.overcommit = c.selection().overcommit();
  o.num_rounds = c.num_rounds();
  o.target_accuracy = c.target_accuracy();
  o.max_virtual_s = c.max_virtual_hours() * 3600.0;
  o.min_updates = c.min_updates();
  o.round_deadline_s = c.round_deadline_s();
  o.closing = c.round_closing();
  o.min_online_clients = c.min_online_clients();
  o.batch_size = batch;
  o.local_steps = local_steps;
  o.start_time_s = c.traces().start_time_s();
  FEDSCHED_ASSIGN_OR_RETURN(sim->simulator,
                            Simulator::Create(o, sim->capacity.get(), sim->availability.get(),
                                              sim->selector.get(), sim->learner.get()));
  return sim;
}

}  // namespace fedsched::sim
