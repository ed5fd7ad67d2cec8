#include "server/fleet/job_run.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace fedsched::fleet {

absl::StatusOr<std::shared_ptr<Store>> JobStore(Store* root, const v1::JobRecord& record) {
  if (record.config_job()) return std::shared_ptr<Store>(root, [](Store*) {});
  absl::StatusOr<std::unique_ptr<Store>> view = root->OpenNamespace(record.store_namespace());
  if (!view.ok()) return view.status();
  return std::shared_ptr<Store>(*std::move(view));
}

absl::StatusOr<std::shared_ptr<Coordinator>> OpenJobCoordinator(const JobHostOptions& host,
                                                                JobOpening opening) {
  CoordinatorOptions options;
  options.config = std::move(opening.config);
  options.store = opening.store.get();
  options.initial_model = std::move(opening.initial_model);
  if (host.model_features) options.model_features = host.model_features(options.config.model());
  if (host.make_evaluator) options.evaluator = host.make_evaluator(options.config);
  options.on_round_committed = std::move(opening.callbacks.round_committed);
  options.on_round_failed = std::move(opening.callbacks.round_failed);
  options.on_task_failed = std::move(opening.callbacks.task_failed);
  options.on_update_rejected = std::move(opening.callbacks.update_rejected);
  if (host.clock) options.clock = host.clock;
  options.deterministic_task_ids = host.deterministic_task_ids;
  options.enrolment_key = host.enrolment_key;
  std::shared_ptr<round::PlanningGate> gate = std::move(opening.gate);
  options.planning_gate = gate.get();
  options.job_name = opening.job_name;
  options.target_accuracy = opening.target_accuracy;
  absl::StatusOr<std::unique_ptr<Coordinator>> created = Coordinator::Create(std::move(options));
  if (!created.ok()) return created.status();
  // The deleter holds the store and the gate: a coordinator kept by a device call past the
  // job's end still has its namespace and its view of the fleet.
  return std::shared_ptr<Coordinator>(
      created->release(),
      [store = std::move(opening.store), gate = std::move(gate)](Coordinator* c) { delete c; });
}

std::string WireTaskId(const JobRun& run, std::string_view task_id) {
  if (run.record.config_job()) return std::string(task_id);
  return absl::StrCat(run.record.spec().name(), "/", std::string(task_id));
}

TaskRoute SplitTaskId(std::string_view wire_task_id) {
  const size_t slash = wire_task_id.find('/');
  if (slash == std::string_view::npos) return {"", wire_task_id};
  return {wire_task_id.substr(0, slash), wire_task_id.substr(slash + 1)};
}

}  // namespace fedsched::fleet
