#include "server/metrics_csv.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/jobs/job_spec.h"
#include "server/privacy/round_privacy.h"

namespace fedsched {

MetricsWriter::MetricsWriter(const std::string& path, bool fedbuff, std::string job)
    : path_(path), fedbuff_(fedbuff), prefix_(job.empty() ? "" : "job " + job + " | ") {
  if (path_.empty()) return;
  std::ifstream existing(path_);
  const bool has_content = existing.good() && existing.peek() != std::ifstream::traits_type::eof();
  absl::MutexLock lock(&mu_);
  out_.open(path_, std::ios::app);
  if (!has_content) {
    out_ << "round,participants,wall_seconds,test_accuracy,test_loss,mean_train_loss,"
            "stragglers,cache_hit_ratio,predictor_mape,total_examples,aggregation_calls,"
            "staleness_mean,staleness_max,dropped_stale,oom_failures,passed_over,memory_mape,"
            "client_eval_accuracy,client_eval_loss,client_eval_version,client_eval_examples,"
         << privacy::kCsvColumns << ",uplink_bytes,downlink_bytes,stale_folded,stale_weight_mean\n";
    out_.flush();
  }
}

void MetricsWriter::Write(const v1::RoundRecord& r) {
  absl::MutexLock lock(&mu_);
  const double wall = (r.end_unix_ms() - r.start_unix_ms()) / 1000.0;
  // An evaluated model always has a positive cross-entropy loss: 0 means not evaluated (no
  // test set, or not an eval.every_n_rounds round), which must not read as accuracy 0.
  const std::string quality =
      r.test_loss() > 0
          ? absl::StrFormat("test_accuracy %.4f | test_loss %.4f", r.test_accuracy(), r.test_loss())
      : r.client_eval_examples() > 0 ? absl::StrFormat(
                                           "client_eval_accuracy %.4f | client_eval_loss %.4f "
                                           "(model %d, %d examples)",
                                           r.client_eval_accuracy(), r.client_eval_loss(),
                                           r.client_eval_version(), r.client_eval_examples())
                                     : std::string("not evaluated");
  const std::string fedbuff =
      fedbuff_ ? absl::StrFormat(" | staleness mean %.2f max %d | dropped %d stale",
                                 r.staleness_mean(), r.staleness_max(), r.dropped_stale())
               : std::string();
  const std::string privacy = r.dp_delta() > 0
                                  ? absl::StrFormat(" | epsilon %.3f (delta %.2g) | clip %.3g",
                                                    r.dp_epsilon(), r.dp_delta(), r.dp_clip_norm())
                                  : std::string();
  // Bytes on the devices' links (docs/guides/COMPRESSION.md "Metrics").
  const std::string links = r.uplink_bytes() > 0 || r.downlink_bytes() > 0
                                ? absl::StrFormat(" | up %.2f MB down %.2f MB",
                                                  r.uplink_bytes() / 1e6, r.downlink_bytes() / 1e6)
                                : std::string();
  // Stragglers' late updates folded into the round (aggregation.stale_updates).
  const std::string stale = r.stale_updates_folded() > 0
                                ? absl::StrFormat(" | %d late (mean weight %.2f)",
                                                  r.stale_updates_folded(), r.stale_weight_mean())
                                : std::string();
  std::printf("%sround %3lld | participants %3d | %7.2f s | %s%s%s%s%s\n", prefix_.c_str(),
              static_cast<long long>(r.round()), r.updates_accepted(), wall, quality.c_str(),
              stale.c_str(), fedbuff.c_str(), privacy.c_str(), links.c_str());
  std::fflush(stdout);
  if (!out_.is_open()) return;
  out_ << absl::StrFormat(
      "%d,%d,%.3f,%.6f,%.6f,%.6f,%d,%.4f,%.4f,%d,%d,%.3f,%d,%d,%d,%d,%.4f,%.6f,%.6f,%d,%d,%s,"
      "%d,%d,%d,%.4f\n",
      r.round(), r.updates_accepted(), wall, r.test_accuracy(), r.test_loss(), r.mean_train_loss(),
      r.stragglers_size(), r.cache_hit_ratio(), r.predictor_mape(), r.total_examples(),
      r.aggregation_calls(), r.staleness_mean(), r.staleness_max(), r.dropped_stale(),
      r.oom_failures(), r.passed_over_size(), r.memory_mape(), r.client_eval_accuracy(),
      r.client_eval_loss(), r.client_eval_version(), r.client_eval_examples(), privacy::CsvCells(r),
      r.uplink_bytes(), r.downlink_bytes(), r.stale_updates_folded(), r.stale_weight_mean());
  out_.flush();
}

JobMetricsWriters::JobMetricsWriters(const v1::ServerConfig& config)
    : config_job_(jobs::ConfigJobSpec(config).name()),
      metrics_csv_(config.metrics_csv()),
      config_writer_(config.metrics_csv(), config.aggregation().async_fedbuff()) {}

void JobMetricsWriters::Write(const std::string& job, const v1::RoundRecord& r) {
  if (job == config_job_) return config_writer_.Write(r);
  MetricsWriter* writer;
  {
    absl::MutexLock lock(&mu_);
    std::unique_ptr<MetricsWriter>& w = by_job_[job];
    if (w == nullptr) w = std::make_unique<MetricsWriter>(CsvOf(job), false, job);
    writer = w.get();
  }
  writer->Write(r);
}

std::string JobMetricsWriters::CsvOf(const std::string& job) const {
  if (metrics_csv_.empty()) return "";
  const size_t slash = metrics_csv_.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : metrics_csv_.substr(0, slash + 1);
  return absl::StrCat(dir, job, ".metrics.csv");
}

}  // namespace fedsched
