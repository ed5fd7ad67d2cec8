// The loopback harness of ingest_bench (bench/ingest/ingest_bench.cc, server ingest
// throughput): the real CoordinatorService and a byte-counting baseline service
// (ingest_baseline.proto) on one in-process gRPC server, N registered devices that upload the
// same payloads to either, and the timing of a phase of N concurrent senders.
#ifndef FEDSCHED_BENCH_INGEST_INGEST_HARNESS_H_
#define FEDSCHED_BENCH_INGEST_INGEST_HARNESS_H_

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fedsched/v1/coordinator.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "ingest_baseline.grpc.pb.h"
#include "server/service/coordinator.h"
#include "server/service/grpc_service.h"
#include "server/store/store.h"

namespace fedsched::bench::ingest {

// Distinct payloads per model size; clients take them in turn.
inline constexpr int kPayloadPool = 2;

// A serialized delta as a client uploads it.
struct Payload {
  std::string bytes;
  std::string sha256;  // raw 32-byte digest of `bytes`
};

// kPayloadPool payloads of a SyntheticModel delta of `params` float32 values each (seeds 17, 18,
// ...), serialized, with their SHA-256.
std::vector<Payload> MakePayloads(int64_t params);

// One simulated device: its channel (own connection), stubs for both services, its session and
// the current round's task.
struct Device {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Coordinator::Stub> coordinator;
  std::unique_ptr<bench::ByteSink::Stub> sink;
  std::string client_id;
  std::string token;
  std::string task_id;
  int64_t round = 0;
};

class ByteSinkService;

// A Coordinator + CoordinatorService + ByteSink on 127.0.0.1:0 over a fresh RocksDB store, and N
// registered devices. SendBaseline and SendUpdate may run concurrently for different devices;
// the other methods are called from one thread.
class IngestHarness {
 public:
  // Starts the server for a model of `params` float32 values (all zero) and registers `clients`
  // devices, each on its own channel. Errors: from the store, the coordinator or Register;
  // UNAVAILABLE if 127.0.0.1 cannot be listened on.
  static absl::StatusOr<std::unique_ptr<IngestHarness>> Create(int clients, int64_t params);

  // Shuts the server down (2 s grace) and deletes the store's folder.
  ~IngestHarness();

  // Gives every device a task of the current round (planning one if none is running).
  // Errors: whatever PollTask returns; INTERNAL if a device gets no task.
  absl::Status AssignTasks();

  // Commits the round whose updates are all in and returns its record (updates_accepted,
  // aggregation_calls). The round may already have closed and committed on the last upload's
  // thread (first-K: the K-th update closes it). Errors: INTERNAL if it did not commit within
  // 60 s; the store's, reading it back.
  absl::StatusOr<v1::RoundRecord> CommitRound();

  // Streams `payload` from device `i` to the byte sink (header + chunks of
  // transport.chunk_bytes). Errors: the RPC's status; INTERNAL if the sink counted other bytes.
  absl::Status SendBaseline(int i, const Payload& payload) const;

  // Uploads `payload` as device `i`'s update for its current task (UploadUpdate: header +
  // chunks, as the SDK does). Errors: the server's verdict when the update is rejected.
  absl::Status SendUpdate(int i, const Payload& payload) const;

 private:
  IngestHarness() = default;

  std::filesystem::path dir_;
  v1::ServerConfig config_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<CoordinatorService> service_;
  std::unique_ptr<ByteSinkService> sink_;
  std::unique_ptr<grpc::Server> server_;
  std::vector<Device> devices_;
};

// Waits until the process is idle (less than 5 % of a core busy over 50 ms, at most 5 s): the
// round's commit leaves RocksDB flushing and compacting the new model on background threads,
// which would otherwise run inside the next timed phase.
void WaitUntilIdle();

// Wall and process CPU seconds of one phase.
struct PhaseTimes {
  double wall = 0;
  double cpu = 0;         // whole process
  double client_cpu = 0;  // the N sending threads alone
};

// Runs send(i) for i in [0, n) on n threads released together; returns the wall time from the
// release to the last return, the process CPU time over the same span, and the CPU time of the
// sending threads. The first error wins.
absl::StatusOr<PhaseTimes> RunConcurrently(int n, const std::function<absl::Status(int)>& send);

}  // namespace fedsched::bench::ingest

#endif  // FEDSCHED_BENCH_INGEST_INGEST_HARNESS_H_
