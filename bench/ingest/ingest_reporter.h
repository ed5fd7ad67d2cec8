// The console reporter of ingest_bench (bench/ingest/ingest_bench.cc): Google
// Benchmark's usual console output, then summary tables of the Ingest rows (MB/s, ratio to the
// raw gRPC baseline, CPU s/GB) and of the Step rows (GB/s per server step).
#ifndef FEDSCHED_BENCH_INGEST_INGEST_REPORTER_H_
#define FEDSCHED_BENCH_INGEST_INGEST_REPORTER_H_

#include <string>
#include <utility>
#include <vector>

#include "benchmark/benchmark.h"

namespace fedsched::bench::ingest {

// Console output as usual, plus a summary table of the Ingest and Step rows at the end.
class IngestReporter : public benchmark::ConsoleReporter {
 public:
  // Tabular console output, in colour when `color`.
  explicit IngestReporter(bool color) : ConsoleReporter(color ? OO_ColorTabular : OO_Tabular) {}

  // Prints the runs as the console reporter does and keeps the counters of the Ingest and Step
  // rows (iterations only, no errors) for the tables.
  void ReportRuns(const std::vector<Run>& runs) override;

  // Prints the console reporter's end, then the Ingest table (counters baseline_MBps,
  // ingest_MBps, ratio%, *_cpu_s/GB, update_MB, updates/fold) and the Step table (*_GBps) to
  // stdout.
  void Finalize() override;

 private:
  std::vector<std::pair<std::string, benchmark::UserCounters>> ingest_;
  std::vector<std::pair<std::string, benchmark::UserCounters>> steps_;
};

}  // namespace fedsched::bench::ingest

#endif  // FEDSCHED_BENCH_INGEST_INGEST_REPORTER_H_
