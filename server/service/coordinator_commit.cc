// Coordinator: commits (docs/ARCHITECTURE.md "Persistence"). A closed round is evaluated,
// written to the store and published with the engine lock released, one round at a time, in
// round order.
#include <cmath>
#include <optional>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "common/logging.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "server/aggregation/checks.h"
#include "server/service/coordinator.h"

namespace fedsched {
namespace {

// A store commit is retried this many times (a transient I/O error), then the server stops.
constexpr int kCommitAttempts = 3;

// Folds `older`, the rounds committed in memory since the last checkpoint, into `newer`, the
// commit of the round after them: their records go first, receipts are kept, a profile changed
// in both keeps `newer`'s version, and `newer`'s planner state wins unless it has none.
void MergeEarlierRounds(RoundCommit older, RoundCommit& newer) {
  older.earlier_records.push_back(std::move(older.record));
  for (v1::RoundRecord& r : newer.earlier_records) older.earlier_records.push_back(std::move(r));
  newer.earlier_records = std::move(older.earlier_records);
  for (v1::Receipt& r : newer.receipts) older.receipts.push_back(std::move(r));
  newer.receipts = std::move(older.receipts);
  absl::flat_hash_set<std::string> changed;
  for (const v1::ClientProfile& p : newer.profiles) changed.insert(p.client_id());
  for (v1::ClientProfile& p : older.profiles) {
    if (!changed.contains(p.client_id())) newer.profiles.push_back(std::move(p));
  }
  if (newer.planner_state.empty()) newer.planner_state = std::move(older.planner_state);
}

}  // namespace

absl::Status Coordinator::WriteCheckpoint() {
  absl::MutexLock commit_lock(&commit_mu_);
  if (!pending_checkpoint_.has_value()) return absl::OkStatus();
  const int64_t round = pending_checkpoint_->record.round();
  FEDSCHED_RETURN_IF_ERROR(options_.store->CommitRound(*pending_checkpoint_));
  pending_checkpoint_.reset();
  absl::MutexLock lock(&mu_);
  durable_round_ = round;
  FEDSCHED_LOG(info, "{}checkpoint: round {} is durable", log_prefix_, round);
  return absl::OkStatus();
}

void Coordinator::DrainCommits() {
  while (true) {
    // Whoever holds commit_mu_ commits every queued round, including the ones other threads
    // queue meanwhile (they find it busy and leave): rounds commit in order, one at a time.
    if (!commit_mu_.TryLock()) return;
    while (true) {
      round::ClosedRound job;
      {
        absl::MutexLock lock(&jobs_mu_);
        if (jobs_.empty()) break;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      RunCommit(std::move(job));
    }
    commit_mu_.Unlock();
    // A round queued between the last look and the unlock has nobody to commit it: look again.
    absl::MutexLock lock(&jobs_mu_);
    if (jobs_.empty()) return;
  }
}

bool Coordinator::PassesCollapseGuard(const round::ClosedRound& closed, bool evaluated) {
  // Collapse guard (docs/guides/SECURITY.md "Updates"): a model with a non-finite value, or whose
  // evaluation is non-finite or collapsed, is never stored or published; the engine decides
  // (RoundEngine::GuardCommitted, as in the simulator), takes the round back (the previous
  // model stays) and re-plans it.
  const int64_t round = closed.record.round();
  const v1::RoundRecord& evaluation = closed.commit.record;
  std::optional<round::RoundEngine::Evaluation> metrics;
  if (evaluated) metrics = {evaluation.test_accuracy(), evaluation.test_loss()};
  absl::StatusOr<std::optional<round::ClosedRound>> reverted;
  {
    absl::MutexLock lock(&mu_);
    reverted = engine_->GuardCommitted(closed, metrics);
    if (!reverted.ok()) {
      health_ = absl::DataLossError(reverted.status().message());
      FEDSCHED_LOG(error, "{}", health_.ToString());
      return false;
    }
    if (!reverted->has_value()) return true;
    AdvanceLocked(absl::UnixEpoch() + absl::Seconds(closed.closed_at_s));
  }
  const round::ClosedRound& failed = **reverted;
  FEDSCHED_LOG(warn, "{}round {} failed ({}); the previous model stays", log_prefix_, round,
               failed.failure_reason);
  v1::RoundRecord record = failed.record;
  record.set_test_accuracy(evaluation.test_accuracy());
  record.set_test_loss(evaluation.test_loss());
  if (absl::Status s = options_.store->RecordFailedRound(record); !s.ok()) {
    FEDSCHED_LOG(error, "{}could not record failed round {}: {}", log_prefix_, round, s.ToString());
  }
  return false;
}

void Coordinator::RunCommit(round::ClosedRound closed) {
  const int64_t round = closed.record.round();
  if (!closed.committed) {
    FEDSCHED_LOG(warn, "{}round {} failed ({}); re-planning", log_prefix_, round,
                 closed.failure_reason);
    if (options_.on_round_failed) options_.on_round_failed(closed.record);
    if (absl::Status s = options_.store->RecordFailedRound(closed.record); !s.ok()) {
      FEDSCHED_LOG(error, "{}could not record failed round {}: {}", log_prefix_, round,
                   s.ToString());
    }
    return;
  }
  RoundCommit& commit = closed.commit;
  const bool evaluated = EvaluateCommitted(round, *commit.model, &commit.record);
  if (!PassesCollapseGuard(closed, evaluated)) return;
  commit.meta.set_config_text(ConfigToText(config_));
  {
    // The guard's reference (now with this round's accuracy) survives a restart with the round.
    absl::MutexLock lock(&mu_);
    if (std::optional<v1::CollapseGuardReference> ref = engine_->guard_reference()) {
      *commit.meta.mutable_collapse_guard() = *std::move(ref);
    }
  }
  // The round's parse targets are not needed until the next round's uploads: freed before the
  // new model's bytes are made, so the two never coexist (peak RSS).
  parse_targets_->DropKept();
  // Serialised and hashed once: the store writes these bytes to the model's file and downloads
  // stream them (docs/DECISIONS.md "Model persistence").
  auto blob = std::make_shared<ModelBlob>();
  blob->bytes = commit.model->SerializeAsString();
  blob->sha256 = Sha256(blob->bytes);
  commit.model_bytes = std::shared_ptr<const std::string>(blob, &blob->bytes);
  commit.model_sha256 = blob->sha256;
  const v1::RoundRecord record = commit.record;
  absl::StatusOr<bool> durable = StoreCommit(commit);
  if (!durable.ok()) {
    absl::MutexLock lock(&mu_);
    health_ = absl::Status(durable.status().code(), absl::StrCat("commit of round ", round,
                                                                 " failed: ",
                                                                 durable.status().message()));
    return;
  }
  PublishCommitted(closed, record, std::move(blob), *durable);
  if (options_.on_round_committed) options_.on_round_committed(record);
}

bool Coordinator::EvaluateCommitted(int64_t round, const v1::Model& model,
                                    v1::RoundRecord* record) const {
  if (!options_.evaluator || round % config_.eval().every_n_rounds() != 0) return false;
  absl::StatusOr<EvalMetrics> eval = options_.evaluator(model);
  if (!eval.ok()) {
    FEDSCHED_LOG(warn, "{}evaluation of round {} failed: {}", log_prefix_, round,
                 eval.status().ToString());
    return false;
  }
  record->set_test_accuracy(eval->accuracy);
  record->set_test_loss(eval->loss);
  return true;
}

absl::StatusOr<bool> Coordinator::StoreCommit(RoundCommit& commit) {
  const int64_t round = commit.record.round();
  if (pending_checkpoint_.has_value()) {
    MergeEarlierRounds(std::move(*pending_checkpoint_), commit);
    pending_checkpoint_.reset();
  }
  // Between checkpoints a round is published but not written (ServerConfig
  // .checkpoint_every_rounds); the run's last rounds always are.
  bool durable = round % config_.checkpoint_every_rounds() == 0;
  if (!durable) {
    absl::MutexLock lock(&mu_);
    durable = engine_->finished() || engine_->privacy_budget_exhausted();
  }
  if (!durable) {
    pending_checkpoint_ = commit;
    return false;
  }
  absl::Status stored;
  for (int attempt = 1; attempt <= kCommitAttempts; ++attempt) {
    stored = options_.store->CommitRound(commit);
    if (stored.ok()) return true;
    FEDSCHED_LOG(error, "{}commit of round {} failed (attempt {} of {}): {}", log_prefix_, round,
                 attempt, kCommitAttempts, stored.ToString());
    std::this_thread::sleep_for(std::chrono::milliseconds(100 * attempt));
  }
  return stored;
}

void Coordinator::PublishCommitted(const round::ClosedRound& closed, const v1::RoundRecord& record,
                                   std::shared_ptr<const ModelBlob> blob, bool durable) {
  const int64_t round = closed.record.round();
  absl::MutexLock lock(&mu_);
  if (absl::Status s = engine_->Publish(round, closed.commit.model, std::move(blob)); !s.ok()) {
    FEDSCHED_LOG(error, "{}publishing round {}: {}", log_prefix_, round, s.ToString());
  }
  if (durable) durable_round_ = round;
  // A synchronous round waits for this publication: plan it now, not at the next tick, as of
  // the close (the simulator plans at the same instant; the next tick catches up).
  AdvanceLocked(absl::UnixEpoch() + absl::Seconds(closed.closed_at_s));
  if (engine_->privacy_budget_exhausted()) {
    FEDSCHED_LOG(warn,
                 "{}privacy budget spent: epsilon {:.4f} (delta {:.2g}) after round {}; one more "
                 "round would exceed privacy.target_epsilon {}: the run is finished",
                 log_prefix_, record.dp_epsilon(), record.dp_delta(), round,
                 config_.privacy().target_epsilon());
  }
  // Held polls learn of a finished run (or a FedBuff version) now, not at their bound.
  if (task_listener_) task_listener_();
}

}  // namespace fedsched
