// Job specs (job_spec.h): their checks and the ServerConfig one job runs with.

#include "server/jobs/job_spec.h"

#include <cmath>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/round/round_config.h"

namespace fedsched::jobs {
namespace {

constexpr size_t kMaxJobNameLength = 63;
constexpr int32_t kMaxPriority = 1000;

absl::Status SpecError(std::string_view field, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("spec.", std::string(field), ": ", std::string(why)));
}

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

// Sets `to`'s message field `field` to `from`'s, or clears it when `from` leaves it unset, so
// that a resolver sees exactly what the author wrote.
#define FEDSCHED_COPY_MESSAGE(field)       \
  if (from.has_##field()) {                \
    *to->mutable_##field() = from.field(); \
  } else {                                 \
    to->clear_##field();                   \
  }

// The round settings JobSpec and ServerConfig share, by name (config.proto documents each;
// job_spec_test's RoundFieldsMatch checks the two messages against each other and
// JobServerConfig against this list).
template <typename From, typename To>
void CopyRoundFields(const From& from, To* to) {
  FEDSCHED_COPY_MESSAGE(model)
  FEDSCHED_COPY_MESSAGE(training)
  to->set_clients_per_round(from.clients_per_round());
  to->set_min_updates(from.min_updates());
  to->set_num_rounds(from.num_rounds());
  to->set_round_deadline_s(from.round_deadline_s());
  to->set_round_closing(from.round_closing());
  to->set_min_online_clients(from.min_online_clients());
  FEDSCHED_COPY_MESSAGE(selection)
  FEDSCHED_COPY_MESSAGE(cache)
  FEDSCHED_COPY_MESSAGE(aggregation)
  FEDSCHED_COPY_MESSAGE(eval)
  FEDSCHED_COPY_MESSAGE(privacy)
  FEDSCHED_COPY_MESSAGE(secure_aggregation)
  FEDSCHED_COPY_MESSAGE(compression)
  to->set_seed(from.seed());
  to->set_audit_updates(from.audit_updates());
  to->set_checkpoint_every_rounds(from.checkpoint_every_rounds());
  to->set_replan_backoff_after_failures(from.replan_backoff_after_failures());
  to->set_replan_backoff_max_s(from.replan_backoff_max_s());
}

#undef FEDSCHED_COPY_MESSAGE

absl::Status ValidatePopulation(const v1::JobPopulation& population) {
  for (int i = 0; i < population.required_labels_size(); ++i) {
    if (population.required_labels(i).empty()) {
      return SpecError(absl::StrCat("population.required_labels[", i, "]"), "must not be empty");
    }
  }
  if (population.min_examples() < 0) {
    return SpecError("population.min_examples",
                     absl::StrCat("must be >= 0, got ", population.min_examples()));
  }
  const double interval = population.min_contribution_interval_s();
  if (!std::isfinite(interval) || interval < 0) {
    return SpecError("population.min_contribution_interval_s",
                     absl::StrCat("must be a finite number >= 0, got ", interval));
  }
  return absl::OkStatus();
}

// num_rounds or target_accuracy, and the range of the latter (the evaluation it needs is
// checked on the resolved config).
absl::Status ValidateStopRule(const v1::JobSpec& spec) {
  const double target = spec.target_accuracy();
  if (!std::isfinite(target) || target < 0 || target > 1) {
    return SpecError("target_accuracy", absl::StrCat("must be a fraction in [0, 1], got ", target));
  }
  if (spec.num_rounds() < 0) {
    return SpecError("num_rounds", absl::StrCat("must be >= 0, got ", spec.num_rounds()));
  }
  if (spec.num_rounds() == 0 && target == 0) {
    return SpecError("num_rounds", "a job needs num_rounds > 0 or a target_accuracy");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateJobName(std::string_view name) {
  if (name.empty()) return SpecError("name", "required");
  if (name.size() > kMaxJobNameLength) {
    return SpecError("name",
                     absl::StrCat("at most ", kMaxJobNameLength, " characters, got ", name.size()));
  }
  for (char c : name) {
    if (!NameChar(c)) {
      return SpecError("name",
                       absl::StrCat("\"", std::string(name), "\" may hold only [a-z0-9._-]"));
    }
  }
  if (name[0] == '.' || name[0] == '_' || name[0] == '-') {
    return SpecError("name",
                     absl::StrCat("\"", std::string(name), "\" must start with a letter or digit"));
  }
  return absl::OkStatus();
}

absl::Status ValidateJobSpec(const v1::JobSpec& spec) {
  FEDSCHED_RETURN_IF_ERROR(ValidateJobName(spec.name()));
  if (spec.model().architecture().empty() && spec.model().initial_weights_path().empty()) {
    return SpecError("model", "needs an architecture or an initial_weights_path");
  }
  FEDSCHED_RETURN_IF_ERROR(ValidateStopRule(spec));
  FEDSCHED_RETURN_IF_ERROR(ValidatePopulation(spec.population()));
  if (spec.priority() < -kMaxPriority || spec.priority() > kMaxPriority) {
    return SpecError("priority", absl::StrCat("must be in [", -kMaxPriority, ", ", kMaxPriority,
                                              "], got ", spec.priority()));
  }
  // The round settings are checked as the server's own: the resolver names the field after
  // "spec: ".
  absl::StatusOr<v1::ServerConfig> resolved =
      round::ResolveRoundConfig(JobServerConfig(v1::ServerConfig(), spec), "spec");
  if (!resolved.ok()) return resolved.status();
  // The server fills the default test set of a server-side evaluation, so only the mode matters.
  if (spec.target_accuracy() > 0 && resolved->eval().mode() != v1::EVAL_MODE_SERVER) {
    return SpecError("target_accuracy", "needs a server-side evaluation (eval.mode SERVER)");
  }
  return absl::OkStatus();
}

v1::ServerConfig JobServerConfig(const v1::ServerConfig& server, const v1::JobSpec& spec) {
  // Everything but the round settings is server-wide, so a server-wide field added later flows
  // through without being listed here; every round setting is overwritten from the spec.
  v1::ServerConfig out = server;
  CopyRoundFields(spec, &out);
  out.clear_metrics_csv();
  return out;
}

v1::JobSpec ConfigJobSpec(const v1::ServerConfig& server) {
  v1::JobSpec spec;
  spec.set_name(server.jobs().config_job_name().empty() ? "main" : server.jobs().config_job_name());
  CopyRoundFields(server, &spec);
  return spec;
}

std::string_view JobStateName(v1::JobState state) {
  switch (state) {
    case v1::JOB_STATE_SUBMITTED:
      return "submitted";
    case v1::JOB_STATE_RUNNING:
      return "running";
    case v1::JOB_STATE_PAUSED:
      return "paused";
    case v1::JOB_STATE_FINISHED:
      return "finished";
    case v1::JOB_STATE_FAILED:
      return "failed";
    case v1::JOB_STATE_CANCELLED:
      return "cancelled";
    default:
      return "unspecified";
  }
}

}  // namespace fedsched::jobs
