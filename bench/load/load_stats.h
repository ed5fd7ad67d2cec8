// Figures of a load test (fedsched-load-gen, bench/load/load_gen.cc): /proc figures of the
// server process, the generator's own CPU time, RPC counts by method, percentiles.
#ifndef FEDSCHED_BENCH_LOAD_LOAD_STATS_H_
#define FEDSCHED_BENCH_LOAD_LOAD_STATS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"

namespace fedsched::load {

// Server process figures from /proc; -1 = unknown (no pid, or the process is gone).
struct ProcStats {
  double cpu_seconds = -1;   // utime + stime, seconds
  int64_t peak_rss_kb = -1;  // VmHWM, KiB
  int64_t rss_kb = -1;       // VmRSS, KiB
};

// Reads /proc/<pid>/stat and /proc/<pid>/status; all -1 for pid <= 0 or a vanished process.
ProcStats ReadProc(int pid);

// User + system CPU seconds of this process so far.
double SelfCpuSeconds();

// The value at fraction p in [0, 1] of the sorted values (nearest rank); 0 for none.
double Percentile(std::vector<double> v, double p);

// Counts RPCs and errors by method. Thread-safe.
class Counters {
 public:
  // Counts one finished call of `method`; a non-OK status is an error unless `stopping` (the
  // test is over and the server may be gone). Keeps the first 10 error messages.
  void Add(const std::string& method, const grpc::Status& status, bool stopping);
  // Errors so far, all methods.
  int64_t errors() const;
  // Calls so far by method (errors included).
  std::map<std::string, int64_t> Calls() const;
  // One line per method ("  Method: N calls, E errors") and the first error messages.
  std::string Report() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, int64_t> calls_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> errors_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> examples_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fedsched::load

#endif  // FEDSCHED_BENCH_LOAD_LOAD_STATS_H_
