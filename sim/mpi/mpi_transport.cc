// Transport over MPI point-to-point messages (OpenMPI, Debian's libopenmpi-dev). Built only when
// CMake's FEDSCHED_MPI is ON; no_mpi_transport.cc stands in otherwise.
//
// OpenMPI's blocking calls spin while they wait, which takes a core from the training threads
// while the peer is still busy; and MPI moves a large message only while both sides are inside
// MPI calls, so polling a large transfer with sleeps in between slows it down by orders of
// magnitude (measured here: a 53 MB reply took 2-3 s). Hence: a message is an 8-byte header
// (its length; sent eagerly), then, above kEagerBytes, the receiver's 0-byte clear-to-send, then
// the bytes in blocking calls. Every wait for the peer (for the header, for the clear-to-send)
// polls with sleeps; the transfer itself runs at full speed with both sides in MPI_Send /
// MPI_Recv. Consequence: Send returns only once the receiver has called Receive, so two ranks
// must never send large messages to each other at the same time (the sim/mpi protocol never
// does: rank 0 sends, then waits for the reply).
#define OMPI_SKIP_MPICXX 1  // the C API only: not OpenMPI's deprecated C++ bindings
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "sim/mpi/transport.h"

namespace fedsched::sim::mpi {
namespace {

// MPI counts are ints: the bytes go in chunks of at most 1 GiB, all with the message's tag (MPI
// keeps the order of messages between two ranks on one tag).
constexpr uint64_t kChunk = uint64_t{1} << 30;
// Up to this size the bytes follow the header without a clear-to-send (OpenMPI's shared-memory
// eager limit is 4 KiB: such a send completes without the receiver).
constexpr uint64_t kEagerBytes = 4096;
// The clear-to-send's tag (wire.h's tags are small).
constexpr int kClearToSend = 1000;

absl::Status MpiError(int code, const std::string& what) {
  if (code == MPI_SUCCESS) return absl::OkStatus();
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return absl::InternalError(absl::StrCat("MPI: ", what, ": ", std::string(text, len)));
}

// Waits until a message from `from` with `tag` (or any tag) is pending, sleeping between probes:
// 0, then 10 us doubling up to 250 us (a reply of one message per task pays this wait per task;
// an idle rank's probes cost about 1 % of a core). Returns the MPI error code; `status`
// describes the message.
int AwaitMessage(int from, int tag, MPI_Status* status) {
  std::chrono::microseconds pause(0);
  int flag = 0;
  while (true) {
    if (int rc = MPI_Iprobe(from, tag, MPI_COMM_WORLD, &flag, status); rc != MPI_SUCCESS) {
      return rc;
    }
    if (flag) return MPI_SUCCESS;
    std::this_thread::sleep_for(pause);
    pause = std::min(std::chrono::microseconds(250), pause * 2 + std::chrono::microseconds(10));
  }
}

class MpiTransport : public Transport {
 public:
  MpiTransport(int rank, int size) : rank_(rank), size_(size) {}
  ~MpiTransport() override { MPI_Finalize(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  absl::Status Send(int to, int tag, const std::string& bytes) override {
    if (to < 0 || to >= size_ || to == rank_) {
      return absl::InvalidArgumentError(absl::StrCat("MPI: cannot send to rank ", to));
    }
    const std::string what = absl::StrCat("sending to rank ", to);
    uint64_t n = bytes.size();
    int rc = MPI_Send(&n, 1, MPI_UINT64_T, to, tag, MPI_COMM_WORLD);
    if (rc == MPI_SUCCESS && n > kEagerBytes) {
      MPI_Status status;
      rc = AwaitMessage(to, kClearToSend, &status);
      if (rc == MPI_SUCCESS) {
        rc = MPI_Recv(nullptr, 0, MPI_BYTE, to, kClearToSend, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      }
    }
    for (uint64_t off = 0; rc == MPI_SUCCESS && off < n; off += kChunk) {
      rc = MPI_Send(bytes.data() + off, static_cast<int>(std::min(kChunk, n - off)), MPI_BYTE, to,
                    tag, MPI_COMM_WORLD);
    }
    return MpiError(rc, what);
  }

  absl::StatusOr<Message> Receive(int from) override {
    if (from < 0 || from >= size_ || from == rank_) {
      return absl::InvalidArgumentError(absl::StrCat("MPI: cannot receive from rank ", from));
    }
    const std::string what = absl::StrCat("receiving from rank ", from);
    MPI_Status status;
    int rc = AwaitMessage(from, MPI_ANY_TAG, &status);
    Message m;
    m.tag = status.MPI_TAG;
    uint64_t n = 0;
    if (rc == MPI_SUCCESS) {
      rc = MPI_Recv(&n, 1, MPI_UINT64_T, from, m.tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    if (rc == MPI_SUCCESS && n > kEagerBytes) {
      rc = MPI_Send(nullptr, 0, MPI_BYTE, from, kClearToSend, MPI_COMM_WORLD);
    }
    if (rc == MPI_SUCCESS) m.bytes.resize(n);
    for (uint64_t off = 0; rc == MPI_SUCCESS && off < n; off += kChunk) {
      rc = MPI_Recv(m.bytes.data() + off, static_cast<int>(std::min(kChunk, n - off)), MPI_BYTE,
                    from, m.tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    if (rc != MPI_SUCCESS) return MpiError(rc, what);
    return m;
  }

  [[noreturn]] void Abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; this satisfies [[noreturn]]
  }

 private:
  int rank_;
  int size_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Transport>> MakeMpiTransport(int* argc, char*** argv) {
  if (int rc = MPI_Init(argc, argv); rc != MPI_SUCCESS) return MpiError(rc, "MPI_Init");
  // Errors come back as codes (turned into statuses) instead of ending the process unexplained.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::unique_ptr<Transport>(new MpiTransport(rank, size));
}

}  // namespace fedsched::sim::mpi
