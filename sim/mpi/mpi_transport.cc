// Transport over MPI point-to-point messages (OpenMPI, Debian's libopenmpi-dev). Built only when
// CMake's FEDSCHED_MPI is ON; no_mpi_transport.cc stands in otherwise.
// The C API only: OpenMPI's header would otherwise pull in its deprecated C++ bindings.
#define OMPI_SKIP_MPICXX 1
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

// MPI counts are ints: a message goes as its 8-byte length, then chunks of at most 1 GiB, all
// with the message's tag (MPI keeps the order of messages between two ranks on one tag).
constexpr uint64_t kChunk = uint64_t{1} << 30;

absl::Status MpiError(int code, const std::string& what) {
  if (code == MPI_SUCCESS) return absl::OkStatus();
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return absl::InternalError(absl::StrCat("MPI: ", what, ": ", std::string(text, len)));
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
    // Poll instead of a blocking MPI_Recv, which OpenMPI implements as a busy loop.
    MPI_Status status;
    int flag = 0;
    std::chrono::microseconds pause(0);
    while (true) {
      if (int rc = MPI_Iprobe(from, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &status);
          rc != MPI_SUCCESS) {
        return MpiError(rc, what);
      }
      if (flag) break;
      std::this_thread::sleep_for(pause);
      pause = std::min(std::chrono::microseconds(2000), pause * 2 + std::chrono::microseconds(20));
    }
    Message m;
    m.tag = status.MPI_TAG;
    uint64_t n = 0;
    int rc = MPI_Recv(&n, 1, MPI_UINT64_T, from, m.tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
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
