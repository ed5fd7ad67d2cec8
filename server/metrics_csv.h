// The server's per-round output: one console line and one CSV row per committed round, for
// the config job and for every submitted job (docs/guides/OPERATIONS.md "Metrics").
#ifndef FEDSCHED_SERVER_METRICS_CSV_H_
#define FEDSCHED_SERVER_METRICS_CSV_H_

#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/fedsched/v1/config.pb.h"
#include "proto/fedsched/v1/records.pb.h"

namespace fedsched {

// Appends one CSV row per committed round to `path` ("" = console lines only) and prints the
// round's console line to stdout; writes the header when the file is new or empty. Under
// FedBuff (`fedbuff`) the console line of each version also shows its updates' staleness and
// the tasks dropped as too stale (the CSV has these columns in every mode). A submitted job's
// console lines start with "job <name> | " (`job`; "" for the config job's). A file that cannot
// be opened leaves the console lines only. Thread-safe.
class MetricsWriter {
 public:
  MetricsWriter(const std::string& path, bool fedbuff, std::string job = "");
  // One round: wall seconds from the record's start/end Unix ms, test or client-side
  // evaluation, DP accounting when the record carries it. FedBuff commits call it from upload
  // threads as well as from the ticker.
  void Write(const v1::RoundRecord& r) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Mutex mu_;
  std::string path_;
  bool fedbuff_;
  std::string prefix_;
  std::ofstream out_ ABSL_GUARDED_BY(mu_);
};

// The per-round CSVs and console lines of every job: the config job's to config.metrics_csv
// (as a server of one run), a submitted job's to <metrics_csv's folder>/<job>.metrics.csv
// when metrics_csv is set (console lines only otherwise). Thread-safe.
class JobMetricsWriters {
 public:
  explicit JobMetricsWriters(const v1::ServerConfig& config);
  // One committed round of job `job` (its JobSpec name).
  void Write(const std::string& job, const v1::RoundRecord& r) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  std::string CsvOf(const std::string& job) const;
  const std::string config_job_;
  const std::string metrics_csv_;
  MetricsWriter config_writer_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<MetricsWriter>> by_job_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_METRICS_CSV_H_
