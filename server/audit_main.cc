// fedsched-audit: checks a stopped server's store for exactly-once aggregation.
//
//   fedsched-audit --store_path=DIR [--job=NAME]
//
// Without --job it audits the run of the server's own config (the store's default namespace);
// with --job, that job's rounds (the store namespace its job record names, docs/guides/JOBS.md).
// For every committed round r it replays the round's audited updates (ServerConfig.audit_updates)
// in accept order onto the model of round r-1 with the run's aggregation rule and compares the
// result with the committed model of round r; it also checks that every accepted task has exactly
// one receipt, in that round, whose SHA-256 matches the stored update, and that no task id is
// counted in two rounds. Exits 0 when every round matches, 1 otherwise, 2 on usage errors.
#include <cmath>
#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <set>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/config.h"
#include "common/flags_usage.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "server/aggregation/aggregation_rule_registry.h"
#include "server/aggregation/aggregator.h"
#include "server/cli/store_lock.h"
#include "server/store/store.h"

ABSL_FLAG(std::string, store_path, "", "RocksDB directory of a stopped fedsched-server.");
ABSL_FLAG(std::string, job, "",
          "Audit this job's rounds (its store namespace); empty = the run of the server's own "
          "config (the store's default namespace).");
ABSL_FLAG(double, tolerance, 1e-5, "Largest accepted |difference| per parameter.");

namespace fedsched {
namespace {

// Largest absolute difference between two models of the same layout; +inf on a layout mismatch.
double MaxAbsDiff(const v1::Model& a, const v1::Model& b) {
  if (a.tensors_size() != b.tensors_size()) return INFINITY;
  double worst = 0;
  for (int t = 0; t < a.tensors_size(); ++t) {
    const auto& x = a.tensors(t).data();
    const auto& y = b.tensors(t).data();
    if (x.size() != y.size() || a.tensors(t).name() != b.tensors(t).name()) return INFINITY;
    for (int i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs((double)x[i] - y[i]));
  }
  return worst;
}

// Errors of the steps below carry, as their message, the whole line Main prints after
// "fedsched-audit: " (exit code 2).
absl::Status UsageError(const absl::Status& s) { return absl::Status(s.code(), s.ToString()); }

// The store of a stopped server at `path`, opened without creating one. Errors: --store_path
// missing, no store there, a server running on it, or the store does not open.
absl::StatusOr<std::unique_ptr<Store>> OpenStoppedStore(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("--store_path is required");
  // Opening would create an empty store: refuse a path that holds none.
  std::error_code error;
  if (!std::filesystem::exists(std::filesystem::path(path) / "CURRENT", error)) {
    return absl::NotFoundError(absl::StrCat("no fedsched store (RocksDB) at ", path));
  }
  // A running server holds the store's RocksDB lock: say so instead of RocksDB's LOCK error.
  FEDSCHED_RETURN_IF_ERROR(cli::CheckStoreNotInUse(path));
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open({.path = path, .keep_models = 0});
  if (!store.ok()) return UsageError(cli::ExplainStoreOpenError(path, store.status()));
  return store;
}

// The store namespace of job `job`: the one its record names ("" for the job of the server's
// own config), or, without a record, a namespace of that name. Errors: NOT_FOUND naming the
// jobs the store holds; FAILED_PRECONDITION for a job that never started (no namespace yet:
// opening one would create it, and the audit writes nothing).
absl::StatusOr<std::string> JobNamespace(const Store& store, const std::string& path,
                                         const std::string& job) {
  FEDSCHED_ASSIGN_OR_RETURN(const std::vector<v1::JobRecord> records, store.LoadJobs());
  FEDSCHED_ASSIGN_OR_RETURN(const std::vector<std::string> namespaces, store.ListNamespaces());
  const auto has_namespace = [&](const std::string& ns) {
    return std::find(namespaces.begin(), namespaces.end(), ns) != namespaces.end();
  };
  std::vector<std::string> names;
  for (const v1::JobRecord& record : records) {
    if (record.spec().name() != job) {
      names.push_back(record.spec().name());
      continue;
    }
    const std::string& ns = record.store_namespace();
    if (!ns.empty() && !has_namespace(ns)) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", job, " has no rounds in the store at ", path, " (never started)"));
    }
    return ns;
  }
  if (has_namespace(job)) return job;
  return absl::NotFoundError(absl::StrCat("no job ", job, " in the store at ", path, " (jobs: ",
                                          names.empty() ? "none" : absl::StrJoin(names, ", "),
                                          ")"));
}

// The stored run's metadata and its server config, when the run can be replayed: started with
// audit_updates, and FedAvg (stateless).
struct AuditedRun {
  v1::RunMeta meta;
  v1::ServerConfig config;
};

absl::StatusOr<AuditedRun> LoadAuditedRun(const Store& store) {
  AuditedRun run;
  absl::StatusOr<v1::RunMeta> meta = store.LoadMeta();
  if (!meta.ok()) return UsageError(meta.status());
  run.meta = *std::move(meta);
  if (absl::Status s = ParseTextConfig(run.meta.config_text(), "stored run config", &run.config);
      !s.ok()) {
    return UsageError(s);
  }
  if (!run.config.audit_updates()) {
    return absl::FailedPreconditionError("the run was not started with audit_updates: true");
  }
  // The replay redoes FedAvg's arithmetic; a rule registered only in the server is unknown here.
  const absl::StatusOr<std::string> rule = ResolveAggregationRuleName(run.config.aggregation());
  if (!rule.ok() || *rule != "fedavg") {
    return absl::FailedPreconditionError("replay supports FedAvg runs only (stateless)");
  }
  return run;
}

// Folds `round`'s audited `updates` into `aggregator` in accept order, checking each against
// the record, its receipt and the tasks `seen_tasks` in earlier rounds. Returns the problem
// found, "" when none.
std::string FoldAuditedUpdates(const Store& store, int64_t round, const v1::RoundRecord& record,
                               const std::vector<v1::AuditedUpdate>& updates,
                               Aggregator& aggregator, std::set<std::string>& seen_tasks) {
  std::string problem;
  for (size_t i = 0; problem.empty() && i < updates.size(); ++i) {
    const v1::AuditedUpdate& u = updates[i];
    absl::StatusOr<v1::Receipt> receipt = store.LoadReceipt(u.task_id());
    v1::Model delta;
    v1::CompressedModel compressed;
    if (u.task_id() != record.accepted_task_ids(static_cast<int>(i))) {
      problem = "accept order differs from the record";
    } else if (!seen_tasks.insert(u.task_id()).second) {
      problem = "task " + u.task_id() + " counted twice";
    } else if (!receipt.ok() || receipt->round() != round ||
               receipt->sha256() != Sha256(u.payload())) {
      problem = "receipt of task " + u.task_id() + " missing or mismatched";
    } else if (u.compressed() ? !compressed.ParseFromString(u.payload())
                              : !delta.ParseFromString(u.payload())) {
      problem = "stored update does not parse";
    } else if (absl::Status s = u.compressed()
                                    ? aggregator.AccumulateCompressed(compressed, u.num_examples(),
                                                                      u.staleness())
                                    : aggregator.Accumulate(delta, u.num_examples(), u.staleness());
               !s.ok()) {
      problem = std::string(s.message());
    }
  }
  return problem;
}

// Replays `updates` onto `previous` with the run's rule and compares with `committed`; `*diff`
// gets the largest difference. Returns the problem found, "" when none.
std::string ReplayRound(const Store& store, const v1::ServerConfig& config, int64_t round,
                        const v1::RoundRecord& record, const v1::Model& previous,
                        const v1::Model& committed, const std::vector<v1::AuditedUpdate>& updates,
                        std::set<std::string>& seen_tasks, double* diff) {
  absl::StatusOr<std::unique_ptr<Aggregator>> aggregator =
      Aggregator::Create(config.aggregation(), previous);
  std::string problem;
  if (aggregator.ok()) {
    problem = FoldAuditedUpdates(store, round, record, updates, **aggregator, seen_tasks);
  }
  // Bounded influence: a round whose denominator was raised past its folded weight.
  if (problem.empty() && aggregator.ok() &&
      record.weight_denominator() > static_cast<double>((*aggregator)->total_examples())) {
    if (absl::Status s = (*aggregator)
                             ->PerturbSum([](absl::Span<float>) { return absl::OkStatus(); },
                                          record.weight_denominator());
        !s.ok()) {
      problem = std::string(s.message());
    }
  }
  if (!problem.empty()) return problem;
  absl::StatusOr<v1::Model> replayed = aggregator.ok()
                                           ? (*aggregator)->Finalize(previous)
                                           : absl::StatusOr<v1::Model>(aggregator.status());
  if (!replayed.ok()) return std::string(replayed.status().message());
  *diff = MaxAbsDiff(*replayed, committed);
  if (!(*diff <= absl::GetFlag(FLAGS_tolerance))) return "model differs from replay";
  return "";
}

// Audits committed round `round` and prints its line. Returns true when it matches.
bool AuditRound(const Store& store, const v1::ServerConfig& config, int64_t round,
                std::set<std::string>& seen_tasks) {
  std::string problem;
  absl::StatusOr<v1::Model> previous = store.LoadModel(round - 1);
  absl::StatusOr<v1::Model> committed = store.LoadModel(round);
  absl::StatusOr<v1::RoundRecord> record = store.LoadRound(round);
  absl::StatusOr<std::vector<v1::AuditedUpdate>> updates = store.LoadAuditedUpdates(round);
  double diff = INFINITY;
  if (!previous.ok() || !committed.ok() || !record.ok() || !updates.ok()) {
    problem = "missing model, record or updates";
  } else if (record->outcome() != v1::ROUND_OUTCOME_COMMITTED) {
    problem = "record is not COMMITTED";
  } else if (static_cast<int>(updates->size()) != record->accepted_task_ids_size()) {
    problem = "stored updates differ from the record's accepted tasks";
  } else {
    problem = ReplayRound(store, config, round, *record, *previous, *committed, *updates,
                          seen_tasks, &diff);
  }
  std::printf("round %lld: %s (%d updates, max |diff| %.3g)%s%s\n", static_cast<long long>(round),
              problem.empty() ? "OK" : "MISMATCH",
              updates.ok() ? static_cast<int>(updates->size()) : -1, diff,
              problem.empty() ? "" : ": ", problem.c_str());
  return problem.empty();
}

// The store to audit: the default namespace of `store`, or --job's namespace (`*view` keeps
// it). Errors: those of JobNamespace and OpenNamespace, as usage errors.
absl::StatusOr<const Store*> AuditedStore(Store& store, std::unique_ptr<Store>* view) {
  const std::string job = absl::GetFlag(FLAGS_job);
  if (job.empty()) return &store;
  absl::StatusOr<std::string> ns = JobNamespace(store, absl::GetFlag(FLAGS_store_path), job);
  if (!ns.ok()) return UsageError(ns.status());
  std::printf("job %s (store namespace %s)\n", job.c_str(),
              ns->empty() ? "default" : ns->c_str());
  if (ns->empty()) return &store;
  absl::StatusOr<std::unique_ptr<Store>> opened = store.OpenNamespace(*ns);
  if (!opened.ok()) return UsageError(opened.status());
  *view = *std::move(opened);
  return view->get();
}

int Main() {
  absl::StatusOr<std::unique_ptr<Store>> store = OpenStoppedStore(absl::GetFlag(FLAGS_store_path));
  std::unique_ptr<Store> view;
  absl::StatusOr<const Store*> audited =
      store.ok() ? AuditedStore(**store, &view) : absl::StatusOr<const Store*>(store.status());
  absl::StatusOr<AuditedRun> run =
      audited.ok() ? LoadAuditedRun(**audited) : absl::StatusOr<AuditedRun>(audited.status());
  if (!run.ok()) {
    std::fprintf(stderr, "fedsched-audit: %s\n", std::string(run.status().message()).c_str());
    return 2;
  }
  int bad = 0;
  std::set<std::string> seen_tasks;
  for (int64_t round = 1; round <= run->meta.committed_round(); ++round) {
    bad += AuditRound(**audited, run->config, round, seen_tasks) ? 0 : 1;
  }
  std::printf("fedsched-audit: %lld committed rounds, %d mismatched\n",
              static_cast<long long>(run->meta.committed_round()), bad);
  return bad == 0 ? 0 : 1;
}

}  // namespace
}  // namespace fedsched

int main(int argc, char** argv) {
  fedsched::SetUsage("fedsched store audit: replays every committed round");
  absl::ParseCommandLine(argc, argv);
  return fedsched::Main();
}
