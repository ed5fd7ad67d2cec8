// RoundEngine's secure aggregation (docs/guides/SECURE_AGGREGATION.md "Over the wire"): a
// synchronous round's tasks form the cohort; the key steps run from the round's start, each closing
// when its last member answers or at its step deadline; the round's uploads are the masked inputs,
// folded into the protocol's masked sum and never into the aggregator one by one; when the round
// would close (first K, the deadline, or no task left) the unmask step opens, and the round commits
// with the unmasked sum, or fails, model unchanged, when fewer than t survive.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "secagg/update_vector.h"
#include "server/round/checkin_pacer.h"
#include "server/round/engine.h"

namespace fedsched::round {

namespace {

// A conservative bound on the L2 norm of a clipped update plus N(0, stddev^2) noise in each of
// `params` coordinates: C + stddev (sqrt(P) + 4). The noise's norm exceeds stddev (sqrt(P) + t)
// with probability at most exp(-t^2 / 2) (Gaussian concentration of the norm, a 1-Lipschitz
// function), 3e-4 for t = 4; beyond it the quantiser's clip shortens the noised update slightly.
double NoisedClipBound(double clip, double stddev, uint64_t params) {
  return clip + stddev * (std::sqrt(static_cast<double>(params)) + 4.0);
}

}  // namespace

std::string RoundEngine::NextGraphSeed() const {
  if (options_.secagg_graph_seed) return options_.secagg_graph_seed();
  std::string seed(32, '\0');
  uint64_t z = config_.seed() * kSplitMixGamma + static_cast<uint64_t>(round_) +
               static_cast<uint64_t>(attempts_failed()) * 0xD1B54A32D192ED03ULL;
  for (size_t i = 0; i < 4; ++i) {
    z = Mix64(z + i);
    std::memcpy(seed.data() + 8 * i, &z, 8);
  }
  return seed;
}

void RoundEngine::StartSecAgg(double now_s) {
  secagg_.reset();
  secagg_status_ = absl::OkStatus();
  secagg_cohort_.clear();
  secagg_pending_.clear();
  if (!config_.secure_aggregation().enabled() || async_ || !running_) return;
  SecAggRoundSpec spec;
  spec.config = config_.secure_aggregation();
  spec.round = round_;
  spec.now_s = now_s;
  int64_t max_examples = 0;
  for (const auto& [id, task] : tasks_) {
    if (task.round != round_) continue;
    spec.task_ids.push_back(id);
    max_examples = std::max<int64_t>(max_examples, int64_t{task.local_steps} * task.batch_size);
  }
  for (const v1::Tensor& t : model()->tensors()) spec.vector_length += t.data_size();
  spec.graph_seed = NextGraphSeed();
  if (privacy_ == nullptr) {
    spec.clip_norm = config_.aggregation().clip_update_norm();
    spec.example_scale = max_examples;
  } else {
    // Differential privacy weighs every update 1; distributed noise rides inside the clip bound.
    spec.clip_norm = privacy_->central()
                         ? privacy_->clip_norm()
                         : NoisedClipBound(privacy_->clip_norm(), privacy_->client_noise_stddev(),
                                           spec.vector_length);
    spec.example_scale = 0;
  }
  absl::StatusOr<std::unique_ptr<SecAggRound>> started = SecAggRound::Start(spec);
  if (!started.ok()) {
    secagg_status_ = started.status();
    return;
  }
  secagg_ = *std::move(started);
  secagg_cohort_ = spec.task_ids;
  const double timeout = config_.secure_aggregation().step_timeout_s();
  for (uint32_t i = 0; i < secagg_cohort_.size(); ++i) {
    Task& task = tasks_.at(secagg_cohort_[i]);
    task.secagg = secagg_->TaskInfo(i);
    task.secagg.set_advertise_deadline_unix_ms(ToMillis(now_s + timeout));
    task.secagg.set_share_keys_deadline_unix_ms(ToMillis(now_s + 2 * timeout));
  }
}

double RoundEngine::secagg_deadline_s() const {
  return secagg_ != nullptr ? secagg_->step_deadline_s() : std::numeric_limits<double>::infinity();
}

absl::StatusOr<v1::SecAggStepResponse> RoundEngine::SecAggStep(ClientIndex index,
                                                               const v1::SecAggStepRequest& request,
                                                               double now_s) {
  auto it = tasks_.find(request.task_id());
  if (it == tasks_.end()) {
    if (closed_tasks_.contains(request.task_id())) {
      v1::SecAggStepResponse done;  // the round closed: nothing more to do
      done.set_done(true);
      return done;
    }
    return absl::NotFoundError(absl::StrCat("unknown task '", request.task_id(), "'"));
  }
  Task& task = it->second;
  if (task.index != index) {
    return absl::PermissionDeniedError(
        absl::StrCat("task ", request.task_id(), " belongs to another client"));
  }
  if (secagg_ == nullptr || !task.in_secagg() || task.round != round_) {
    return absl::FailedPreconditionError(
        absl::StrCat("task ", task.task_id, " is not in a secure-aggregation round"));
  }
  const uint32_t member = task.secagg.index();
  absl::Status s;
  switch (request.message_case()) {
    case v1::SecAggStepRequest::kAdvertise: {
      const v1::ClientProfile& profile = book_->profile(task.index);
      s = secagg_->Advertise(member, request.advertise(), profile.client_id(),
                             profile.signing_public_key());
      if (absl::IsUnauthenticated(s)) {
        // Counted with the refused uploads: someone tried to speak for another member.
        UpdateClaim claim;
        claim.index = task.index;
        claim.task_id = task.task_id;
        claim.round = task.round;
        RefuseUpdate(&claim, RejectReason::kSignature, now_s, s.message());
      }
      break;
    }
    case v1::SecAggStepRequest::kShareKeys:
      s = secagg_->ShareKeys(member, request.share_keys());
      break;
    case v1::SecAggStepRequest::kUnmask:
      s = secagg_->Unmask(member, request.unmask());
      break;
    case v1::SecAggStepRequest::MESSAGE_NOT_SET:
      break;
  }
  if (!s.ok()) {
    // A refused message leaves the member behind: it cannot take part any more.
    if (task.in_flight() && !absl::IsFailedPrecondition(s)) {
      FailTaskState(task, now_s, absl::StrCat("secure aggregation refused: ", s.message()));
    }
    return s;
  }
  return secagg_->NextFor(member);
}

void RoundEngine::FailDroppedMembers(double now_s) {
  for (uint32_t i = 0; i < secagg_cohort_.size(); ++i) {
    auto it = tasks_.find(secagg_cohort_[i]);
    if (it == tasks_.end() || !it->second.in_flight() || !secagg_->dropped(i)) continue;
    FailTaskState(it->second, now_s, "dropped by secure aggregation: missed a key step");
  }
}

void RoundEngine::ChargeUnauthenticated(double now_s) {
  for (const auto& [member, accusers] : secagg_->accusations()) {
    auto it = tasks_.find(secagg_cohort_[member]);
    if (it == tasks_.end()) continue;
    Task& task = it->second;
    // A signature reported at step 1 fails at the advertisement, a share at step 2.
    const std::string why = absl::StrCat(
        "secure aggregation: its ",
        secagg_->unverified().contains(member) ? "signed key advertisement or key shares"
                                               : "key shares",
        " to ", accusers.size(), " neighbour(s) did not authenticate (cohort members ",
        absl::StrJoin(accusers, ", "), "); left out of the round");
    // Its masked input, if it came, is not in the sum: take it out of the round's record.
    auto pending = std::find_if(secagg_pending_.begin(), secagg_pending_.end(),
                                [&](const PendingSuccess& p) { return p.task_id == task.task_id; });
    if (pending != secagg_pending_.end()) {
      record_.set_updates_accepted(record_.updates_accepted() - 1);
      record_.set_total_examples(record_.total_examples() - pending->num_examples);
      loss_sum_ -= pending->metrics.mean_loss() * static_cast<double>(pending->num_examples);
      auto* ids = record_.mutable_accepted_task_ids();
      ids->erase(std::remove(ids->begin(), ids->end(), task.task_id), ids->end());
      receipts_.erase(
          std::remove_if(receipts_.begin(), receipts_.end(),
                         [&](const v1::Receipt& r) { return r.task_id() == task.task_id; }),
          receipts_.end());
      secagg_pending_.erase(pending);
    }
    if (!task.failed) FailTaskState(task, now_s, why);
    // One accuser may be the liar; two or more neighbours agreeing charge the sender for good.
    if (accusers.size() >= 2) {
      (void)book_->ExcludeFromSecAgg(task.index, absl::StrCat("round ", task.round, ": ", why),
                                     now_s);
    }
  }
}

ClosedRound RoundEngine::FailSecAgg(double now_s, const absl::Status& why) {
  // Fail drops the protocol's state with the round's.
  return Fail(now_s, absl::StrCat("secure aggregation: ", why.message()));
}

std::optional<ClosedRound> RoundEngine::AdvanceSecAgg(double now_s, int outstanding) {
  if (!secagg_status_.ok()) {
    const absl::Status why = std::exchange(secagg_status_, absl::OkStatus());
    return FailSecAgg(now_s, why);
  }
  SecAggRound& sa = *secagg_;
  const bool past_deadline = now_s >= deadline_s_;
  if (sa.phase() == SecAggPhase::kAdvertise || sa.phase() == SecAggPhase::kShareKeys) {
    if (past_deadline)
      return FailSecAgg(now_s, absl::DeadlineExceededError("key steps past the round's deadline"));
    absl::StatusOr<bool> stepped = sa.AdvanceKeySteps(now_s, [&](uint32_t i) {
      auto it = tasks_.find(secagg_cohort_[i]);
      return it != tasks_.end() && it->second.in_flight();
    });
    if (!stepped.ok()) return FailSecAgg(now_s, stepped.status());
    // Both key steps may close in one call when every member has answered.
    if (*stepped) {
      FailDroppedMembers(now_s);
      return AdvanceSecAgg(now_s, outstanding);
    }
    return std::nullopt;
  }
  if (sa.phase() == SecAggPhase::kMaskedInput) {
    outstanding = 0;
    for (const std::string& id : secagg_cohort_) {
      auto it = tasks_.find(id);
      if (it != tasks_.end() && it->second.in_flight()) ++outstanding;
    }
    if (ShouldClose(now_s, outstanding)) {
      const absl::Status s = sa.BeginUnmasking(now_s);
      ChargeUnauthenticated(now_s);  // whether or not enough survive to unmask
      if (!s.ok()) return FailSecAgg(now_s, s);
    } else if (past_deadline || outstanding == 0) {
      return FailSecAgg(now_s,
                        absl::FailedPreconditionError(absl::StrCat(
                            record_.updates_accepted(), " of min_updates ", config_.min_updates(),
                            " masked inputs by the ", past_deadline ? "deadline" : "last task")));
    } else {
      return std::nullopt;
    }
  }
  if (sa.phase() != SecAggPhase::kUnmask || !sa.UnmaskingComplete(now_s)) return std::nullopt;
  absl::StatusOr<SecAggRound::Result> result = sa.Finish();
  if (!result.ok()) return FailSecAgg(now_s, result.status());
  if (absl::Status s = FoldUnmaskedSum(*result); !s.ok()) return FailSecAgg(now_s, s);
  // The contributors' inputs are in the sum: now they count as successful.
  for (const PendingSuccess& p : std::exchange(secagg_pending_, {})) {
    (void)planner_->OnUpdate(p.index, p.round, p.metrics, p.timing, p.now_s);
  }
  secagg_.reset();
  secagg_cohort_.clear();
  return Close(now_s);
}

void RoundEngine::FoldMaskedInputs(absl::Span<const Update> updates,
                                   absl::Span<const size_t> positions,
                                   std::vector<absl::Status>* verdicts) {
  for (size_t i : positions) {
    const Update& update = updates[i];
    Task& task = tasks_.at(update.claim.task_id);
    absl::Status s;
    if (update.masked == nullptr || !task.in_secagg()) {
      s = absl::InvalidArgumentError(absl::StrCat(
          "round ", task.round, " runs secure aggregation: task ", task.task_id,
          " must upload its masked input (v1::SecAggMaskedInput), not a plain update"));
    } else {
      // The weight the client masked with (CheckUpdate bounded the examples by the scale).
      s = secagg_->AddMaskedInput(
          task.secagg.index(), *update.masked,
          secagg::MaskWeight(update.claim.num_examples, task.secagg.example_scale()));
    }
    if (s.ok()) {
      RecordAccepted(update, task, update.claim.num_examples);
      NoteUnclipped(update);
    }
    (*verdicts)[i] = std::move(s);
  }
}

absl::Status RoundEngine::FoldUnmaskedSum(const SecAggRound::Result& result) {
  // The flat sum back into the global model's tensors, in their order (the SDK flattens the
  // update the same way).
  v1::Model sum;
  size_t offset = 0;
  for (const v1::Tensor& t : model()->tensors()) {
    v1::Tensor* out = sum.add_tensors();
    out->set_name(t.name());
    *out->mutable_shape() = t.shape();
    const auto n = static_cast<size_t>(t.data_size());
    if (offset + n > result.sum.sum.size()) {
      return absl::InternalError("unmasked sum shorter than the model");
    }
    out->mutable_data()->Add(result.sum.sum.begin() + offset, result.sum.sum.begin() + offset + n);
    offset += n;
  }
  const auto contributors = static_cast<int64_t>(result.sum.contributors.size());
  FEDSCHED_RETURN_IF_ERROR(
      aggregator_->AccumulatePartial(sum, record_.total_examples(), contributors));
  record_.set_aggregation_calls(record_.aggregation_calls() + 1);
  if (privacy_ != nullptr) return absl::OkStatus();  // DP fixes its own denominator at Close
  if (!(result.total_weight > 0)) {
    return absl::FailedPreconditionError("the contributors' FedAvg weights sum to 0");
  }
  // sum_k w_k d_k / sum_k w_k with w_k = n_k / example_scale: FedAvg's example-weighted mean.
  return aggregator_->PerturbSum([](absl::Span<float>) { return absl::OkStatus(); },
                                 result.total_weight);
}

}  // namespace fedsched::round
