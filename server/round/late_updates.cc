// RoundEngine: staleness-aware aggregation of stragglers' updates, REFL's SAA (Abdelmoniem et
// al., EuroSys 2023, section 4.2; docs/ALGORITHMS.md §6.3). Split from engine.cc along this
// seam; the class is declared in engine.h.
//
// A straggler keeps training after its round commits. Its update, arriving in a later round, is
// checked like any other, copied (its delta is not owned by the engine) and held until the open
// round closes: REFL weighs a stale update by how far it is from that round's fresh mean, which
// is only known once the fresh updates are in.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/aggregation/checks.h"
#include "server/aggregation/stale_updates.h"
#include "server/round/engine.h"

namespace fedsched::round {

const RoundEngine::LateTask* RoundEngine::FindLateTask(const UpdateClaim& claim) const {
  if (!StaleUpdatesOn()) return nullptr;
  auto it = late_tasks_.find(claim.index);
  if (it == late_tasks_.end() || it->second.task_id != claim.task_id) return nullptr;
  return &it->second;
}

absl::Status RoundEngine::CheckLateUpdate(const UpdateClaim& claim, const LateTask& late,
                                          RejectReason* why) const {
  *why = RejectReason::kTask;
  if (claim.round != late.round) {
    return absl::FailedPreconditionError(absl::StrCat("update names round ", claim.round,
                                                      " but task ", late.task_id, " is for round ",
                                                      late.round));
  }
  if (claim.num_examples > late.planned_examples) {
    *why = RejectReason::kExamples;
    return absl::InvalidArgumentError(
        absl::StrCat("update for task ", late.task_id, " claims ", claim.num_examples,
                     " examples; the task was for at most ", late.planned_examples));
  }
  const v1::StaleUpdatesConfig& stale = config_.aggregation().stale_updates();
  *why = RejectReason::kLate;
  const int64_t rounds_late = current_round() - late.round;
  if (stale.max_rounds_late() > 0 && rounds_late > stale.max_rounds_late()) {
    return absl::FailedPreconditionError(
        absl::StrCat("late update: the task of round ", late.round, " is ", rounds_late,
                     " rounds late, more than aggregation.stale_updates.max_rounds_late = ",
                     stale.max_rounds_late()));
  }
  if (static_cast<int64_t>(held_updates_.size()) >= stale.max_held()) {
    // Not RESOURCE_EXHAUSTED: the client must not retry; the update is dropped as a late one.
    return absl::FailedPreconditionError(
        absl::StrCat("late update: aggregation.stale_updates.max_held = ", stale.max_held(),
                     " stale updates already wait for round ", current_round()));
  }
  return absl::OkStatus();
}

absl::Status RoundEngine::HoldLateUpdate(const Update& update, RejectReason* why) {
  const LateTask* late = FindLateTask(update.claim);
  if (late == nullptr) return absl::InternalError("HoldLateUpdate without a late task");
  *why = RejectReason::kPayload;
  v1::Model decoded;
  const v1::Model* delta = update.delta;
  if (update.compressed != nullptr) {
    FEDSCHED_ASSIGN_OR_RETURN(decoded, aggregator_->DecodeCompressed(*update.compressed));
    delta = &decoded;
  }
  if (delta == nullptr) {
    return absl::InvalidArgumentError(
        "a straggler's late update must carry its delta (float32 or compressed)");
  }
  *why = RejectReason::kValidation;
  FEDSCHED_RETURN_IF_ERROR(ValidateUpdate(*delta, *versions_->model()));
  const ModelLayout& layout = aggregator_->layout();
  HeldUpdate held;
  held.delta.assign(static_cast<size_t>(layout.total_size()), 0.0f);
  double squares = 0;
  for (const v1::Tensor& t : delta->tensors()) {
    const int i = layout.Find(t.name());
    std::copy(t.data().begin(), t.data().end(), held.delta.begin() + layout.offset(i));
    for (float v : t.data()) squares += static_cast<double>(v) * v;
  }
  // Clipped as the aggregator clips a fresh update, before REFL's weight scales it.
  const double clip = config_.aggregation().clip_update_norm();
  const double norm = std::sqrt(squares);
  if (clip > 0 && norm > clip) {
    const auto factor = static_cast<float>(clip / norm);
    for (float& v : held.delta) v *= factor;
  }
  record_.set_uplink_bytes(record_.uplink_bytes() + update.upload_bytes);
  held.num_examples = update.claim.num_examples;
  held.round = late->round;
  held.task_id = late->task_id;
  late_tasks_.erase(update.claim.index);
  held_updates_.push_back(std::move(held));
  return absl::OkStatus();
}

void RoundEngine::NoteLateTasks() {
  if (!StaleUpdatesOn() || async_) return;
  for (const auto& [id, task] : tasks_) {
    if (!stragglers_.contains(id)) continue;
    late_tasks_[task.index] = {
        .task_id = id,
        .round = task.round,
        .planned_examples = static_cast<int64_t>(task.local_steps) * task.batch_size};
  }
}

absl::Status RoundEngine::FoldHeldUpdates() {
  if (held_updates_.empty() || aggregator_->num_updates() == 0) return absl::OkStatus();
  std::vector<float> fresh_mean;
  FEDSCHED_RETURN_IF_ERROR(aggregator_->RunningMean(&fresh_mean));
  const int64_t num_fresh = aggregator_->num_updates();
  std::vector<double> deviation(held_updates_.size());
  double max_deviation = 0;
  for (size_t k = 0; k < held_updates_.size(); ++k) {
    deviation[k] = StaleDeviation(held_updates_[k].delta, fresh_mean, num_fresh);
    max_deviation = std::max(max_deviation, deviation[k]);
  }
  const v1::StaleUpdatesConfig& stale = config_.aggregation().stale_updates();
  const ModelLayout& layout = aggregator_->layout();
  double weight_sum = 0;
  for (size_t k = 0; k < held_updates_.size(); ++k) {
    const HeldUpdate& held = held_updates_[k];
    const double w =
        StaleUpdateWeight(stale, current_round() - held.round, deviation[k], max_deviation);
    // The aggregator takes integer weights: fold weight m ~ w x examples, and scale the delta
    // so that the numerator is exactly w x examples x delta.
    const double exact = w * static_cast<double>(influence_.Weight(held.num_examples));
    const int64_t m = std::max<int64_t>(1, std::llround(exact));
    const auto scale = static_cast<float>(exact / static_cast<double>(m));
    v1::Model scaled;
    for (int i = 0; i < layout.num_tensors(); ++i) {
      v1::Tensor* t = scaled.add_tensors();
      t->set_name(layout.name(i));
      for (int64_t d : layout.shape(i)) t->add_shape(d);
      const float* from = held.delta.data() + layout.offset(i);
      t->mutable_data()->Reserve(static_cast<int>(layout.size(i)));
      for (int64_t j = 0; j < layout.size(i); ++j) t->add_data(from[j] * scale);
    }
    FEDSCHED_RETURN_IF_ERROR(aggregator_->Accumulate(scaled, m));
    influence_.NoteFolded(m);
    weight_sum += w;
  }
  const auto folded = static_cast<int32_t>(held_updates_.size());
  record_.set_stale_updates_folded(folded);
  record_.set_stale_weight_mean(weight_sum / folded);
  held_updates_.clear();
  return absl::OkStatus();
}

}  // namespace fedsched::round
