// MakeMpiTransport of a build without MPI (CMake FEDSCHED_MPI OFF).
#include "sim/mpi/transport.h"

namespace fedsched::sim::mpi {

absl::StatusOr<std::unique_ptr<Transport>> MakeMpiTransport(int* argc, char*** argv) {
  return absl::FailedPreconditionError(
      "this fedsched-sim was built without MPI (configure with -DFEDSCHED_MPI=ON after "
      "scripts/install_deps.sh installed libopenmpi-dev), so it cannot run under mpirun with "
      "several ranks");
}

}  // namespace fedsched::sim::mpi
