// The job spec (v1::JobSpec, docs/guides/JOBS.md): its checks, and the ServerConfig one job runs
// with. Pure: no file is read (a weights file is checked when the job starts).
#ifndef FEDSCHED_SERVER_JOBS_JOB_SPEC_H_
#define FEDSCHED_SERVER_JOBS_JOB_SPEC_H_

#include <string_view>

#include "absl/status/status.h"
#include "fedsched/v1/config.pb.h"
#include "fedsched/v1/jobs.pb.h"

namespace fedsched::jobs {

// A job name: 1-63 characters of [a-z0-9._-], starting with a letter or digit. Errors:
// INVALID_ARGUMENT "spec.name: ...".
[[nodiscard]] absl::Status ValidateJobName(std::string_view name);

// Checks a submitted spec and names the first bad field ("spec.<field>: <why>"): the name; the
// model (an architecture or an initial weights path); num_rounds or target_accuracy (one is
// required; target_accuracy in [0, 1] and only with a server-side evaluation); the population
// (labels non-empty, min_examples >= 0, min_contribution_interval_s >= 0 and finite); priority
// in [-1000, 1000]; and the round settings as round::ResolveRoundConfig checks them. Errors:
// INVALID_ARGUMENT.
[[nodiscard]] absl::Status ValidateJobSpec(const v1::JobSpec& spec);

// The ServerConfig a job runs with: the server-wide settings of `server` (listen_address,
// store_path, transport, security, pacing, hierarchy, ops, heartbeats, jobs, shutdown grace)
// with the round settings of `spec` (model, training, K, min_updates, num_rounds, deadline,
// closing, min_online_clients, selection, cache, aggregation, eval, privacy, secure
// aggregation, seed, audit_updates, checkpointing, replan backoff); a round setting the spec
// leaves unset takes its own default, never the server config's. metrics_csv is cleared (a
// job's CSV is the caller's). Not resolved: the caller resolves it as the server's config.
v1::ServerConfig JobServerConfig(const v1::ServerConfig& server, const v1::JobSpec& spec);

// The job of the server's own config: named jobs.config_job_name ("main" when unset), with the
// config's round settings, priority 0 and an empty population (every device with a trainer for
// it). JobServerConfig(server, ConfigJobSpec(server)) has server's round settings.
v1::JobSpec ConfigJobSpec(const v1::ServerConfig& server);

// A job state's name as tools print it: "submitted", "running", "paused", "finished", "failed",
// "cancelled" ("unspecified" for any other value).
std::string_view JobStateName(v1::JobState state);

}  // namespace fedsched::jobs

#endif  // FEDSCHED_SERVER_JOBS_JOB_SPEC_H_
