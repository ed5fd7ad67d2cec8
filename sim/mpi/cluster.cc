#include "sim/mpi/cluster.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "sim/mpi/distributed_learner.h"

namespace fedsched::sim::mpi {

int LaunchedRanks() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* v = std::getenv(name);
    if (v != nullptr) return std::max(1, std::atoi(v));
  }
  return 1;
}

absl::StatusOr<std::unique_ptr<Cluster>> Cluster::Join(int* argc, char*** argv) {
  if (LaunchedRanks() <= 1) return std::unique_ptr<Cluster>();
  absl::StatusOr<std::unique_ptr<Transport>> transport = MakeMpiTransport(argc, argv);
  if (!transport.ok()) return transport.status();
  return std::make_unique<Cluster>(*std::move(transport));
}

Cluster::~Cluster() = default;

LearnerFactory Cluster::learner_factory() {
  return [this](const v1::SimConfig& config) -> absl::StatusOr<std::unique_ptr<Learner>> {
    absl::StatusOr<std::unique_ptr<DistributedLearner>> l =
        DistributedLearner::Create(config, transport_.get(), make_trainer_);
    if (!l.ok()) return l.status();
    return std::unique_ptr<Learner>(*std::move(l));
  };
}

absl::Status Cluster::StopWorkers() { return mpi::StopWorkers(*transport_); }

absl::Status Cluster::Serve() { return ServeTraining(*transport_, make_trainer_); }

void Cluster::Abort(const absl::Status& status) {
  std::fprintf(stderr, "fedsched-sim rank %d: %s\n", rank(), status.ToString().c_str());
  std::fflush(stderr);
  transport_->Abort(1);
  std::abort();  // not reached: Transport::Abort ends the process
}

}  // namespace fedsched::sim::mpi
