// One job as the job host (job_host.h) runs it: its record, its resolved config and, while it is
// open (running or paused), its store namespace and its Coordinator.
#ifndef FEDSCHED_SERVER_FLEET_JOB_RUN_H_
#define FEDSCHED_SERVER_FLEET_JOB_RUN_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "fedsched/v1/config.pb.h"
#include "fedsched/v1/jobs.pb.h"
#include "fedsched/v1/records.pb.h"
#include "fedsched/v1/tensor.pb.h"
#include "server/fleet/job_host.h"
#include "server/round/planning_gate.h"
#include "server/service/coordinator.h"
#include "server/store/store.h"

namespace fedsched::fleet {

// A job's state in the host; the host's lock guards every field.
struct JobRun {
  // Durable (Store::PutJob on every change).
  v1::JobRecord record;
  // JobServerConfig(server, spec) resolved (the config job: the server's config itself).
  v1::ServerConfig config;
  // Task.model_architecture of its tasks (ModelConfig.architecture, "" for a bare weights file).
  std::string architecture;
  // Being opened by a starter (outside the host's lock): counts as running, not yet routed to.
  bool starting = false;
  // Its store: the default namespace (not owned) for the config job, else its own namespace.
  std::shared_ptr<Store> store;
  // While open: the job's coordinator (its deleter keeps `store` alive until the coordinator is
  // gone, so a device call holding a copy may outlive the job's end). Null otherwise.
  std::shared_ptr<Coordinator> coordinator;
};

// The store of `record`'s job: `root` itself (not owned) for the config job, else
// root->OpenNamespace(record.store_namespace()). Errors: OpenNamespace's.
[[nodiscard]] absl::StatusOr<std::shared_ptr<Store>> JobStore(Store* root,
                                                              const v1::JobRecord& record);

// What a job's coordinator reports to the host (CoordinatorOptions' callbacks of one job).
struct JobCallbacks {
  std::function<void(const v1::RoundRecord&)> round_committed;
  std::function<void(const v1::RoundRecord&)> round_failed;
  std::function<void(const std::string& reason)> task_failed;
  std::function<void(const std::string& reason)> update_rejected;
};

// What opening one job's coordinator takes besides the host's options.
struct JobOpening {
  // CoordinatorOptions::job_name: the job's name, "" for the config job (whose log lines stay
  // those of a server of one run).
  std::string job_name;
  // The job's resolved config.
  v1::ServerConfig config;
  std::shared_ptr<Store> store;
  // Its initial model (ignored when its namespace holds a run: Coordinator::Create resumes).
  v1::Model initial_model;
  // JobSpec.target_accuracy (CoordinatorOptions::target_accuracy). 0 = none.
  double target_accuracy = 0;
  // ledger.Gate(name) (kept with the coordinator, which does not own it).
  std::unique_ptr<round::PlanningGate> gate;
  JobCallbacks callbacks;
};

// Creates a job's coordinator (Coordinator::Create: resumes the run its store holds, else starts
// from the initial model), with the host's evaluator, enrolment key, clock and test settings.
// Errors: Coordinator::Create's.
[[nodiscard]] absl::StatusOr<std::shared_ptr<Coordinator>> OpenJobCoordinator(
    const JobHostOptions& host, JobOpening opening);

// Task ids on the wire (docs/guides/JOBS.md): a submitted job's are "<job>/<id>", the config job's
// carry no prefix.
std::string WireTaskId(const JobRun& run, std::string_view task_id);
// The job a wire task id names ("" for none: the config job's) and the coordinator's own id.
struct TaskRoute {
  std::string_view job;
  std::string_view task_id;
};
TaskRoute SplitTaskId(std::string_view wire_task_id);

}  // namespace fedsched::fleet

#endif  // FEDSCHED_SERVER_FLEET_JOB_RUN_H_
