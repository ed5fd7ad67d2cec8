// Point-to-point messages between the ranks of a distributed fedsched-sim run
// (docs/guides/SIMULATION.md "Distributed simulator"). The MPI implementation (MakeMpiTransport) is
// the only code that includes <mpi.h>; tests use an in-process one.
#ifndef FEDSCHED_SIM_MPI_TRANSPORT_H_
#define FEDSCHED_SIM_MPI_TRANSPORT_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fedsched::sim::mpi {

// A fixed group of `size` ranks numbered 0..size-1; this process is `rank`. Messages from one
// rank to another arrive in the order they were sent. Used by one thread per process.
class Transport {
 public:
  struct Message {
    int tag = 0;  // a wire.h Tag
    std::string bytes;
  };

  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Sends `bytes` (any length) with `tag` to rank `to` != rank(); may block until `to` starts
  // receiving it. Errors: INVALID_ARGUMENT for a bad rank; INTERNAL naming the rank when the
  // transport fails.
  [[nodiscard]] virtual absl::Status Send(int to, int tag, const std::string& bytes) = 0;
  // Blocks until the next message from rank `from` arrives and returns it. Errors: as Send.
  [[nodiscard]] virtual absl::StatusOr<Message> Receive(int from) = 0;
  // Ends every rank of the job at once with exit status `code` (MPI_Abort): for an error after
  // which this rank cannot follow the protocol, so that no other rank waits for it forever.
  [[noreturn]] virtual void Abort(int code) = 0;
};

// Initialises MPI (MPI_Init) and returns the transport over MPI_COMM_WORLD; MPI_Finalize runs
// when it is destroyed. Waiting for a message polls (MPI_Iprobe) with a sleep of up to 250 us
// between probes rather than spinning, so an idle rank leaves its core to the training threads.
// Send returns once the receiver has called Receive (above 4 KiB).
// Errors: FAILED_PRECONDITION when fedsched was built without MPI (CMake FEDSCHED_MPI OFF);
// INTERNAL when MPI_Init fails.
[[nodiscard]] absl::StatusOr<std::unique_ptr<Transport>> MakeMpiTransport(int* argc, char*** argv);

}  // namespace fedsched::sim::mpi

#endif  // FEDSCHED_SIM_MPI_TRANSPORT_H_
