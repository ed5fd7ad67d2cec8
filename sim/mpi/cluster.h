// fedsched-sim's place in an MPI job: `mpirun -np R fedsched-sim --config=...` spreads each
// round's local training over R ranks (DistributedLearner) and writes the same CSV as one
// process (docs/guides/SIMULATION.md and docs/guides/OPERATIONS.md "Distributed simulator").
// Without mpirun fedsched-sim never touches MPI.
#ifndef FEDSCHED_SIM_MPI_CLUSTER_H_
#define FEDSCHED_SIM_MPI_CLUSTER_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/engine/setup.h"
#include "sim/engine/training_learner.h"
#include "sim/mpi/transport.h"

namespace fedsched::sim::mpi {

// The number of ranks of the MPI job that started this process, from the launcher's
// environment (OpenMPI's OMPI_COMM_WORLD_SIZE, or PMI_SIZE of MPICH-style launchers); 1 when
// not started by one.
int LaunchedRanks();

// One process of a distributed run. Used by the main thread only.
class Cluster {
 public:
  // Joins the job (MPI_Init, via MakeMpiTransport) when LaunchedRanks() > 1; returns null
  // otherwise: a single-process run, MPI untouched. Errors: MakeMpiTransport's (e.g.
  // FAILED_PRECONDITION in a build without MPI).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Cluster>> Join(int* argc, char*** argv);
  // For tests: a cluster over `transport`.
  explicit Cluster(std::unique_ptr<Transport> transport) : transport_(std::move(transport)) {}
  ~Cluster();  // MPI_Finalize (through the transport)

  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  // The trainer factory every rank's TrainingLearner uses (fedsched-sim's, with LibTorch when
  // built with it). Default: null (TrainingLearner's built-in trainers).
  void set_trainer_factory(TrainerFactory make_trainer) { make_trainer_ = std::move(make_trainer); }

  int rank() const { return transport_->rank(); }
  int size() const { return transport_->size(); }

  // Rank 0: BuildSimulation's learner factory, a DistributedLearner over this job.
  LearnerFactory learner_factory();
  // Rank 0: tells every other rank to return from Serve. Errors: the transport's.
  [[nodiscard]] absl::Status StopWorkers();
  // Ranks > 0: trains for rank 0 until it stops this rank (ServeTraining).
  [[nodiscard]] absl::Status Serve();
  // Prints "fedsched-sim rank R: <status>" on stderr and ends every rank (MPI_Abort), for an
  // error after which this rank cannot follow the protocol.
  [[noreturn]] void Abort(const absl::Status& status);

 private:
  std::unique_ptr<Transport> transport_;
  TrainerFactory make_trainer_;
};

}  // namespace fedsched::sim::mpi

#endif  // FEDSCHED_SIM_MPI_CLUSTER_H_
