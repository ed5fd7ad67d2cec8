#include "server/cli/job_format.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "google/protobuf/util/json_util.h"
#include "server/jobs/job_spec.h"

namespace fedsched::cli {
namespace {

using jobs::JobStateName;

// "2026-01-02 03:04:05Z", or "-" for 0 (never).
std::string UtcTime(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%SZ", absl::FromUnixMillis(unix_ms), absl::UTCTimeZone());
}

std::string Accuracy(double accuracy) {
  return accuracy > 0 ? absl::StrFormat("%.4f", accuracy) : "-";
}

std::string RoundProgress(const v1::JobRecord& job) {
  const int32_t total = job.spec().num_rounds();
  return total > 0 ? absl::StrCat(job.committed_round(), "/", total)
                   : absl::StrCat(job.committed_round());
}

std::string ModelName(const v1::ModelConfig& model) {
  std::string name = model.architecture().empty() ? "-" : model.architecture();
  if (!model.initial_weights_path().empty()) {
    absl::StrAppend(&name, " (weights ", model.initial_weights_path(), ")");
  }
  return name;
}

}  // namespace

bool JobEnded(v1::JobState state) {
  return state == v1::JOB_STATE_FINISHED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

std::string FormatJobTable(const std::vector<v1::JobRecord>& jobs) {
  if (jobs.empty()) return "no jobs\n";
  size_t name_width = 4;
  for (const v1::JobRecord& job : jobs) {
    name_width = std::max(name_width, job.spec().name().size());
  }
  const int w = static_cast<int>(name_width);
  std::string out = absl::StrFormat("%-*s  %-9s  %-9s  %-8s  %8s  %-20s  %s\n", w, "NAME", "STATE",
                                    "ROUND", "ACCURACY", "PRIORITY", "SUBMITTED", "REASON");
  for (const v1::JobRecord& job : jobs) {
    absl::StrAppend(
        &out, absl::StrFormat("%-*s  %-9s  %-9s  %-8s  %8d  %-20s  %s\n", w, job.spec().name(),
                              std::string(JobStateName(job.state())), RoundProgress(job),
                              Accuracy(job.last_accuracy()), job.spec().priority(),
                              UtcTime(job.submitted_unix_ms()), job.reason()));
  }
  return out;
}

std::string FormatJobDetail(const v1::JobRecord& job) {
  const v1::JobSpec& spec = job.spec();
  std::string out;
  auto line = [&out](const char* key, const std::string& value) {
    absl::StrAppend(&out, absl::StrFormat("%-17s %s\n", absl::StrCat(key, ":"), value));
  };
  line("job", spec.name() + (job.config_job() ? " (the server config's job)" : ""));
  line("state", std::string(JobStateName(job.state())));
  if (!job.reason().empty()) line("reason", job.reason());
  line("model", ModelName(spec.model()));
  line("rounds", RoundProgress(job));
  if (spec.target_accuracy() > 0) {
    line("target accuracy", absl::StrFormat("%.4f", spec.target_accuracy()));
  }
  line("last accuracy", Accuracy(job.last_accuracy()));
  line("clients/round", absl::StrCat(spec.clients_per_round()));
  const v1::JobPopulation& population = spec.population();
  if (population.required_labels_size() > 0) {
    line("labels", absl::StrJoin(population.required_labels(), ","));
  }
  if (population.min_examples() > 0) line("min examples", absl::StrCat(population.min_examples()));
  line("priority", absl::StrCat(spec.priority()));
  line("submitted", UtcTime(job.submitted_unix_ms()));
  line("started", UtcTime(job.started_unix_ms()));
  line("ended", UtcTime(job.ended_unix_ms()));
  line("store namespace", job.store_namespace().empty() ? "(default)" : job.store_namespace());
  return out;
}

std::string FormatRoundLine(const v1::RoundRecord& round) {
  std::string out =
      absl::StrFormat("round %d  %-9s  updates %d accepted %d rejected  %d examples", round.round(),
                      round.outcome() == v1::ROUND_OUTCOME_COMMITTED ? "committed" : "failed",
                      round.updates_accepted(), round.updates_rejected(), round.total_examples());
  if (round.test_accuracy() > 0) {
    absl::StrAppend(&out, absl::StrFormat("  accuracy %.4f loss %.4f", round.test_accuracy(),
                                          round.test_loss()));
  }
  if (round.mean_train_loss() > 0) {
    absl::StrAppend(&out, absl::StrFormat("  train loss %.4f", round.mean_train_loss()));
  }
  if (round.end_unix_ms() > round.start_unix_ms() && round.start_unix_ms() > 0) {
    absl::StrAppend(
        &out, absl::StrFormat("  %.1f s", (round.end_unix_ms() - round.start_unix_ms()) / 1000.0));
  }
  return out + "\n";
}

std::string FormatJobStateLine(const v1::JobRecord& job) {
  std::string out =
      absl::StrCat("job ", job.spec().name(), ": ", std::string(JobStateName(job.state())));
  if (!job.reason().empty()) absl::StrAppend(&out, " (", job.reason(), ")");
  absl::StrAppend(&out, " at round ", job.committed_round());
  if (job.last_accuracy() > 0) absl::StrAppend(&out, ", accuracy ", Accuracy(job.last_accuracy()));
  return out + "\n";
}

std::string ToJsonLine(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string json;
  // Only a message with an Any of an unknown type fails; records hold none.
  if (!google::protobuf::util::MessageToJsonString(message, &json, options).ok()) return "{}\n";
  return json + "\n";
}

}  // namespace fedsched::cli
