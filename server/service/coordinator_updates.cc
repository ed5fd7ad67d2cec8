// Coordinator: upload ingest (docs/ARCHITECTURE.md "An upload's path"): metric checks, size and
// digest, parsing into recycled models outside the lock, then flat combining into the engine.
#include <algorithm>
#include <climits>
#include <cmath>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "server/aggregation/aggregator.h"
#include "server/service/coordinator.h"
#include "server/service/upload_frame.h"

namespace fedsched {

namespace {

double ToSeconds(absl::Time t) { return absl::ToDoubleSeconds(t - absl::UnixEpoch()); }

// What an upload's header claims, for its sender `index` (session checked).
round::UpdateClaim ClaimOf(const v1::UploadHeader& header, profile::ClientIndex index) {
  return {.index = index,
          .task_id = header.task_id(),
          .round = header.round(),
          .num_examples = header.metrics().num_examples()};
}

}  // namespace

absl::Status Coordinator::SubmitUpdate(const v1::UploadHeader& header, const std::string& payload,
                                       absl::Time now, double upload_seconds) {
  const std::string_view piece = payload;
  return SubmitUpdate(header, absl::MakeConstSpan(&piece, 1), now, upload_seconds);
}

void Coordinator::SetParseTargetBudget(int64_t bytes) {
  parse_targets_->SetBudget(bytes, model_bytes_);
}

namespace {

// The checks of an upload's metrics (they need no coordinator state): num_examples > 0, counts
// non-negative and at most 2^53, times and losses finite and non-negative.
absl::Status CheckUpdateMetrics(const v1::UploadHeader& header) {
  const v1::UpdateMetrics& metrics = header.metrics();
  if (metrics.num_examples() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("update for task ", header.task_id(),
                     " declares num_examples = ", metrics.num_examples(), "; it must be > 0"));
  }
  constexpr int64_t kMaxCount = int64_t{1} << 53;
  if (metrics.cache_hits() < 0 || metrics.cache_misses() < 0 || metrics.storage_bytes_read() < 0 ||
      metrics.cache_hits() > kMaxCount || metrics.cache_misses() > kMaxCount ||
      metrics.storage_bytes_read() > kMaxCount || !std::isfinite(metrics.mean_loss()) ||
      !std::isfinite(metrics.train_seconds()) || !std::isfinite(metrics.io_seconds()) ||
      !std::isfinite(metrics.statistical_utility()) || metrics.train_seconds() < 0 ||
      metrics.io_seconds() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "update for task ", header.task_id(), " reports negative, absurd or non-finite metrics"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Coordinator::SubmitPartialSum(const v1::PartialSum& partial, absl::Time now) {
  if (options_.config.hierarchy().role() != v1::HierarchyConfig::ROLE_ROOT) {
    return absl::FailedPreconditionError(
        "partial sums are accepted by a root only (hierarchy.role ROLE_ROOT)");
  }
  std::vector<v1::UploadHeader> headers(static_cast<size_t>(partial.entries_size()));
  for (int i = 0; i < partial.entries_size(); ++i) {
    const v1::PartialEntry& entry = partial.entries(i);
    v1::UploadHeader& header = headers[static_cast<size_t>(i)];
    header.set_client_id(entry.client_id());
    header.set_task_id(entry.task_id());
    *header.mutable_metrics() = entry.metrics();
    FEDSCHED_RETURN_IF_ERROR(CheckUpdateMetrics(header));
  }
  v1::Model sum;
  if (!sum.ParseFromString(partial.sum())) {
    return absl::InvalidArgumentError("partial sum is not a valid Model message");
  }
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    std::vector<round::Update> entries;
    entries.reserve(headers.size());
    for (int i = 0; i < partial.entries_size(); ++i) {
      const v1::PartialEntry& entry = partial.entries(i);
      absl::StatusOr<profile::ClientIndex> index =
          CheckSession(entry.client_id(), entry.session_token());
      if (!index.ok()) {
        engine_->RefuseUpdate(nullptr, round::RejectReason::kSession, ToSeconds(now),
                              index.status().message());
        LogRefusals(now);
        return absl::Status(index.status().code(),
                            absl::StrCat("partial sum entry of client ", entry.client_id(), ": ",
                                         index.status().message()));
      }
      round::Update u;
      u.claim = {.index = *index,
                 .task_id = entry.task_id(),
                 .round = entry.round(),
                 .num_examples = entry.metrics().num_examples()};
      u.metrics = entry.metrics();
      // When the aggregator accepted it (never later than now), for the device's timings.
      const double now_s = absl::ToDoubleSeconds(now - absl::UnixEpoch());
      u.now_s = entry.received_unix_ms() > 0
                    ? std::min(now_s, static_cast<double>(entry.received_unix_ms()) / 1000.0)
                    : now_s;
      u.upload_seconds = entry.upload_seconds();
      u.upload_bytes = entry.upload_bytes();
      u.sha256 = entry.sha256();
      entries.push_back(std::move(u));
    }
    status = engine_->FoldPartial(entries, sum, partial.total_examples());
    if (status.ok()) AdvanceLocked(now);
  }
  DrainCommits();
  if (status.ok()) {
    FEDSCHED_LOG(debug, "{}round {}: partial sum of {} update(s) from aggregator {} accepted",
                 log_prefix_, partial.round(), partial.entries_size(), partial.aggregator_id());
  }
  return status;
}

absl::Status Coordinator::RefuseUpload(const v1::UploadHeader& header, round::RejectReason reason,
                                       absl::Status status, absl::Time now) {
  {
    absl::MutexLock lock(&mu_);
    RefuseUploadLocked(header, reason, status, now);
  }
  // A refusal that failed the last task in flight may have closed the round.
  DrainCommits();
  return status;
}

absl::Status Coordinator::RefuseUploadStream(absl::Status status, absl::Time now) {
  absl::MutexLock lock(&mu_);
  engine_->RefuseUpdate(nullptr, round::RejectReason::kPayload, ToSeconds(now), status.message());
  LogRefusals(now);
  return status;
}

void Coordinator::RefuseUploadLocked(const v1::UploadHeader& header, round::RejectReason reason,
                                     const absl::Status& status, absl::Time now) {
  absl::StatusOr<profile::ClientIndex> index =
      CheckSession(header.client_id(), header.session_token());
  if (!index.ok()) {
    // Whoever sent it cannot be told apart from a stranger: counted, but no task is touched.
    engine_->RefuseUpdate(nullptr, round::RejectReason::kSession, ToSeconds(now),
                          index.status().message());
  } else {
    const round::UpdateClaim claim = ClaimOf(header, *index);
    if (engine_->RefuseUpdate(&claim, reason, ToSeconds(now), status.message())) {
      AdvanceLocked(now);  // the failed task's round may close, or its slot be re-tasked
      return;
    }
  }
  LogRefusals(now);
}

absl::Status Coordinator::CheckUploadHeader(const v1::UploadHeader& header, absl::Time now) {
  if (absl::Status s = CheckUpdateMetrics(header); !s.ok()) {
    return RefuseUpload(header, round::RejectReason::kMetrics, std::move(s), now);
  }
  absl::Status s;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<profile::ClientIndex> index =
        CheckSession(header.client_id(), header.session_token());
    round::RejectReason reason = round::RejectReason::kTask;
    s = index.ok() ? CheckClaim(ClaimOf(header, *index), 0, 0, &reason) : index.status();
    if (s.ok()) return s;
    RefuseUploadLocked(header, reason, s, now);
  }
  DrainCommits();
  return s;
}

absl::Status Coordinator::SubmitUpdate(const v1::UploadHeader& header,
                                       absl::Span<const std::string_view> payload_pieces,
                                       absl::Time now, double upload_seconds,
                                       absl::AnyInvocable<void()> payload_parsed) {
  // Cheap checks, hashing and parsing happen before taking the lock. Parsing goes into a recycled
  // model: filling a fresh one of tens of MB costs a page fault per 4 KiB, about as much CPU as
  // the hash (docs/reports/BENCHMARKS.md, server ingest). Each refusal here is counted
  // (RefuseUpload).
  using round::RejectReason;
  if (absl::Status s = CheckUpdateMetrics(header); !s.ok()) {
    return RefuseUpload(header, RejectReason::kMetrics, std::move(s), now);
  }
  int64_t payload_bytes = 0;
  for (std::string_view piece : payload_pieces) {
    payload_bytes += static_cast<int64_t>(piece.size());
  }
  if (header.total_bytes() != payload_bytes) {
    return RefuseUpload(
        header, RejectReason::kPayload,
        absl::InvalidArgumentError(absl::StrCat("update declares ", header.total_bytes(),
                                                " bytes but carries ", payload_bytes)),
        now);
  }
  if (Sha256OfPieces(payload_pieces) != header.sha256()) {
    return RefuseUpload(header, RejectReason::kPayload,
                        absl::InvalidArgumentError("update SHA-256 does not match its payload"),
                        now);
  }
  if (options_.config.secure_aggregation().enabled()) {
    return SubmitMaskedInput(header, payload_pieces, now, upload_seconds);
  }
  if (header.compressed()) {
    return SubmitCompressedUpdate(header, payload_pieces, now, upload_seconds,
                                  std::move(payload_parsed));
  }
  std::unique_ptr<v1::Model> delta = parse_targets_->Take();
  const bool parsed = ParsePieces(payload_pieces, delta.get());
  // Only the audit trail reads the payload after parsing (RoundEngine stores it verbatim).
  if (payload_parsed && !config_.audit_updates()) {
    payload_pieces = {};
    payload_parsed();
  }
  if (!parsed) {
    parse_targets_->Recycle(std::move(delta));
    return RefuseUpload(header, RejectReason::kPayload,
                        absl::InvalidArgumentError("update payload is not a valid Model message"),
                        now);
  }
  // PyramidFL update dropout: a tensor without values is a dropped one, zeros.
  if (absl::Status inflated = InflateDroppedTensors(parse_targets_->parameters(), delta.get());
      !inflated.ok()) {
    parse_targets_->Recycle(std::move(delta));
    return RefuseUpload(header, RejectReason::kPayload, std::move(inflated), now);
  }
  // Norm screening (docs/guides/SECURITY.md): an update wildly out of line never reaches the sum.
  // Its per-tensor sums of squares go on to the aggregator, whose clipping needs the same norm: one
  // read of the update instead of two.
  std::vector<double> sum_squares = Aggregator::TensorSumSquares(*delta);
  double norm = 0;
  for (double ss : sum_squares) norm += ss;
  norm = std::sqrt(norm);
  UpdateNormScreen::Rule rule = UpdateNormScreen::Rule::kBound;
  if (absl::Status screened = norm_screen_->Check(norm, &rule); !screened.ok()) {
    parse_targets_->Recycle(std::move(delta));
    return RefuseUpload(header,
                        rule == UpdateNormScreen::Rule::kBound ? RejectReason::kNormBound
                                                               : RejectReason::kNormMedian,
                        std::move(screened), now);
  }
  PendingUpdate self;
  self.delta = delta.get();
  self.tensor_sum_squares = sum_squares;
  self.payload_pieces = payload_pieces;
  self.now = now;
  self.upload_seconds = upload_seconds;
  absl::Status s = ApplyUpdate(header, self, /*drain_commits=*/false);
  if (s.ok()) {
    if (self.proven) norm_screen_->RecordAccepted(header.client_id(), norm);
    // The measurement behind the clip default (docs/guides/SECURITY.md "Updates").
    FEDSCHED_LOG(debug, "{}round {}: update of {} accepted, L2 norm {:.4f}", log_prefix_,
                 header.round(), header.client_id(), norm);
  }
  // The parse target goes back before a round this update closed is committed: the commit holds
  // the old and the new model's bytes, and the next upload may parse meanwhile (peak RSS).
  parse_targets_->Recycle(std::move(delta));
  DrainCommits();
  return s;
}

absl::Status Coordinator::SubmitCompressedUpdate(const v1::UploadHeader& header,
                                                 absl::Span<const std::string_view> payload_pieces,
                                                 absl::Time now, double upload_seconds,
                                                 absl::AnyInvocable<void()> payload_parsed) {
  using round::RejectReason;
  v1::CompressedModel update;
  const bool parsed = ParsePieces(payload_pieces, &update);
  if (payload_parsed && !config_.audit_updates()) {
    payload_pieces = {};
    payload_parsed();
  }
  if (!parsed) {
    return RefuseUpload(header, RejectReason::kPayload,
                        absl::InvalidArgumentError("update payload is not a valid CompressedModel "
                                                   "message (the header says compressed)"),
                        now);
  }
  // The screens read the decompressed update's norm, decoding a tensor at a time: the same sums
  // of squares as a float32 upload of the decoded update, handed on to the aggregator's clipping.
  absl::StatusOr<std::vector<double>> sum_squares =
      Aggregator::CompressedSumSquares(update, model_shapes_);
  if (!sum_squares.ok()) {
    return RefuseUpload(header, RejectReason::kValidation, sum_squares.status(), now);
  }
  double norm = 0;
  for (double ss : *sum_squares) norm += ss;
  norm = std::sqrt(norm);
  UpdateNormScreen::Rule rule = UpdateNormScreen::Rule::kBound;
  if (absl::Status screened = norm_screen_->Check(norm, &rule); !screened.ok()) {
    return RefuseUpload(header,
                        rule == UpdateNormScreen::Rule::kBound ? RejectReason::kNormBound
                                                               : RejectReason::kNormMedian,
                        std::move(screened), now);
  }
  PendingUpdate self;
  self.compressed = &update;
  self.tensor_sum_squares = *sum_squares;
  self.payload_pieces = payload_pieces;
  self.now = now;
  self.upload_seconds = upload_seconds;
  absl::Status s = ApplyUpdate(header, self);
  if (s.ok()) {
    if (self.proven) norm_screen_->RecordAccepted(header.client_id(), norm);
    FEDSCHED_LOG(debug, "{}round {}: compressed update of {} accepted, {} bytes, L2 norm {:.4f}",
                 log_prefix_, header.round(), header.client_id(), header.total_bytes(), norm);
  }
  return s;
}

absl::Status Coordinator::SubmitMaskedInput(const v1::UploadHeader& header,
                                            absl::Span<const std::string_view> payload_pieces,
                                            absl::Time now, double upload_seconds) {
  v1::SecAggMaskedInput masked;
  if (!ParsePieces(payload_pieces, &masked)) {
    return RefuseUpload(header, round::RejectReason::kPayload,
                        absl::InvalidArgumentError("secure aggregation is on: the update payload "
                                                   "must be a SecAggMaskedInput message"),
                        now);
  }
  PendingUpdate self;
  self.masked = &masked;
  self.payload_pieces = payload_pieces;
  self.now = now;
  self.upload_seconds = upload_seconds;
  return ApplyUpdate(header, self);
}

absl::StatusOr<v1::SecAggStepResponse> Coordinator::SecAggStep(const v1::SecAggStepRequest& request,
                                                               absl::Time now) {
  const double now_s = absl::ToDoubleSeconds(now - absl::UnixEpoch());
  absl::StatusOr<v1::SecAggStepResponse> response;
  {
    absl::MutexLock lock(&mu_);
    FEDSCHED_ASSIGN_OR_RETURN(profile::ClientIndex index,
                              CheckSession(request.client_id(), request.session_token()));
    (void)engine_->Heartbeat(index, now_s);
    response = engine_->SecAggStep(index, request, now_s);
    if (response.ok() && request.message_case() != v1::SecAggStepRequest::MESSAGE_NOT_SET) {
      // The last member's message closes its step (the last unmask response, the round): what
      // this client is owed may be the next step's input already.
      AdvanceLocked(now);
      v1::SecAggStepRequest ask = request;
      ask.clear_message();
      response = engine_->SecAggStep(index, ask, now_s);
    }
  }
  DrainCommits();
  return response;
}

absl::Status Coordinator::ApplyUpdate(const v1::UploadHeader& header, PendingUpdate& self,
                                      bool drain_commits) {
  // Flat combining: while one thread holds mu_, uploads that arrive queue up; the next thread to
  // get mu_ decides all of them, folding them in few passes over the running sum instead of one
  // pass each (docs/reports/BENCHMARKS.md section 1).
  self.header = &header;
  {
    absl::MutexLock lock(&queue_mu_);
    if (queue_tail_ == nullptr) {
      queue_head_ = &self;
    } else {
      queue_tail_->next = &self;
    }
    queue_tail_ = &self;
  }
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    // Queued updates are taken and marked done within one hold of mu_, so an update not done
    // yet is still queued, and this thread decides it with the others.
    if (self.done) return self.status;
    PendingUpdate* head;
    {
      absl::MutexLock queue_lock(&queue_mu_);
      head = queue_head_;
      queue_head_ = queue_tail_ = nullptr;
    }
    DecideUpdates(head);
    // The other threads read their verdicts once they get mu_, and only then touch their deltas.
    for (PendingUpdate* update = head; update != nullptr; update = update->next) {
      update->done = true;
    }
    status = self.status;
  }
  // Rounds closed while deciding (the K-th update closes first-K rounds and FedBuff versions)
  // are committed now, with the engine lock released (or by the caller, `drain_commits` false).
  if (drain_commits) DrainCommits();
  return status;
}

void Coordinator::DecideUpdates(PendingUpdate* head) {
  // Every verdict is the one that deciding the updates one at a time, in queue order, gives:
  // a check whose answer depends on whether earlier candidates are accepted (the same task
  // twice, the first-K cap, the example count) folds those first and asks again.
  std::vector<round::Update> batch;
  std::vector<PendingUpdate*> owners;
  int64_t pending_examples = 0;
  for (PendingUpdate* update = head; update != nullptr; update = update->next) {
    const v1::UploadHeader& header = *update->header;
    absl::StatusOr<profile::ClientIndex> index =
        CheckSession(header.client_id(), header.session_token());
    if (!index.ok()) {
      update->status = index.status();
      engine_->RefuseUpdate(nullptr, round::RejectReason::kSession, ToSeconds(update->now),
                            index.status().message());
      continue;
    }
    // "Proven" for the median screen's reference (UpdateNormScreen): an identity admitted by
    // provisioning (an enrolment secret, or a client certificate), or one that has had an
    // update accepted before this one. A stranger's first update never shapes the reference, and
    // every client counts once however many updates it sends.
    // ProfileBook::IsUnproven is the admission's own definition (admitted on first use, no
    // update accepted yet).
    update->proven = !engine_->book().IsUnproven(*index);
    round::UpdateClaim claim = ClaimOf(header, *index);
    round::RejectReason reason = round::RejectReason::kTask;
    absl::Status s =
        CheckClaim(claim, static_cast<int32_t>(batch.size()), pending_examples, &reason);
    const bool duplicate = std::any_of(batch.begin(), batch.end(), [&](const round::Update& u) {
      return u.claim.task_id == claim.task_id;
    });
    if ((!s.ok() || duplicate) && !batch.empty()) {
      FoldBatch(&batch, &owners);
      pending_examples = 0;
      s = CheckClaim(claim, 0, 0, &reason);
    }
    if (!s.ok()) {
      engine_->RefuseUpdate(&claim, reason, ToSeconds(update->now), s.message());
      update->status = std::move(s);
      continue;
    }
    round::Update u;
    u.claim = std::move(claim);
    u.delta = update->delta;
    u.masked = update->masked;
    u.compressed = update->compressed;
    u.metrics = header.metrics();
    u.now_s = absl::ToDoubleSeconds(update->now - absl::UnixEpoch());
    u.upload_seconds = update->upload_seconds;
    u.upload_bytes = header.total_bytes();
    u.sha256 = header.sha256();
    u.payload_pieces = update->payload_pieces;
    u.tensor_sum_squares = update->tensor_sum_squares;
    pending_examples += u.claim.num_examples;
    batch.push_back(std::move(u));
    owners.push_back(update);
  }
  FoldBatch(&batch, &owners);
  LogRefusals(head == nullptr ? Now() : head->now);
}

void Coordinator::FoldBatch(std::vector<round::Update>* batch,
                            std::vector<PendingUpdate*>* owners) {
  if (batch->empty()) return;
  std::vector<absl::Status> verdicts = engine_->FoldUpdates(*batch);
  absl::Time latest = absl::InfinitePast();
  for (size_t i = 0; i < owners->size(); ++i) {
    (*owners)[i]->status = std::move(verdicts[i]);
    latest = std::max(latest, (*owners)[i]->now);
  }
  batch->clear();
  owners->clear();
  // First-K (and every FedBuff version) closes as soon as its K-th update is in.
  AdvanceLocked(latest);
}

absl::Status Coordinator::CheckClaim(const round::UpdateClaim& claim, int32_t pending,
                                     int64_t pending_examples, round::RejectReason* reason) const {
  absl::Status s = engine_->CheckUpdate(claim, pending, pending_examples, reason);
  if (absl::IsNotFound(s) && options_.store->LoadReceipt(claim.task_id).ok()) {
    return absl::AlreadyExistsError(
        absl::StrCat("update for task ", claim.task_id, " was already accepted"));
  }
  return s;
}

void Coordinator::NoteActivity(const std::string& client_id, absl::Time now) {
  inbox_.NoteActivity(client_id, now);
}

void Coordinator::ApplyActivityLocked() {
  const absl::flat_hash_map<std::string, absl::Time> activity = inbox_.TakeActivity();
  for (const auto& [client_id, at] : activity) {
    if (!sessions_.contains(client_id)) continue;
    if (std::optional<profile::ClientIndex> index = engine_->book().FindByClientId(client_id)) {
      (void)engine_->Heartbeat(*index, absl::ToDoubleSeconds(at - absl::UnixEpoch()));
    }
  }
}

}  // namespace fedsched
