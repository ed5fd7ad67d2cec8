// SecAggRound: the protocol steps of secure aggregation on the round engine's clock
// (docs/guides/SECURE_AGGREGATION.md "Over the wire").
#include "server/round/secagg_round.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "secagg/graph.h"

namespace fedsched::round {

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();
// How soon a client that asked too early asks again: short, since steps close as soon as the
// last member answers, and a poll is cheap (no model bytes); longer for large cohorts, so that
// the polls stay near 500 per second in all (n / interval).
int64_t RetryMs(uint32_t cohort) { return std::clamp<int64_t>(2 * int64_t{cohort}, 100, 2000); }

const char* PhaseName(SecAggPhase phase) {
  switch (phase) {
    case SecAggPhase::kAdvertise:
      return "advertise keys";
    case SecAggPhase::kShareKeys:
      return "share keys";
    case SecAggPhase::kMaskedInput:
      return "masked input";
    case SecAggPhase::kUnmask:
      return "unmask";
    case SecAggPhase::kDone:
      return "done";
  }
  return "?";
}

// The configured degree and threshold, fitted to a cohort of n: a degree above n - 1 becomes the
// complete graph, an odd sparse degree the even one below it, and the threshold stays a strict
// majority of each neighbourhood and at most its size (secagg::ResolveParams's rules).
void FitGraph(const v1::SecureAggregationConfig& config, uint32_t n, v1::SecAggRoundParams* p) {
  uint32_t k =
      config.degree() > 0 ? static_cast<uint32_t>(config.degree()) : secagg::ChooseDegree(n);
  if (k >= n - 1) {
    k = n - 1;
  } else if (k % 2 == 1) {
    k -= 1;
  }
  if (k < 2) k = n - 1;
  uint32_t t = config.threshold() > 0 ? static_cast<uint32_t>(config.threshold()) : 0;
  t = std::max(t, secagg::ChooseThreshold(k));
  t = std::min(t, k + 1);
  p->set_degree(k);
  p->set_threshold(t);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SecAggRound>> SecAggRound::Start(const SecAggRoundSpec& spec) {
  const auto n = static_cast<uint32_t>(spec.task_ids.size());
  if (n < 3) {
    return absl::FailedPreconditionError(absl::StrCat(
        "secure aggregation needs a cohort of at least 3; round ", spec.round, " planned ", n));
  }
  std::unique_ptr<SecAggRound> r(new SecAggRound());
  v1::SecAggRoundParams& p = r->params_;
  p.set_round_id(static_cast<uint64_t>(spec.round));
  p.set_cohort_size(n);
  FitGraph(spec.config, n, &p);
  p.set_graph_seed(spec.graph_seed);
  p.set_vector_length(spec.vector_length);
  p.set_clip_norm(spec.clip_norm);
  // 32 bits (the default) stays unset on the wire: 0 reads as 32.
  if (const int32_t b = spec.config.bits_per_element(); b != 0 && b != 32) {
    p.set_bits_per_element(static_cast<uint32_t>(b));
  }
  FEDSCHED_ASSIGN_OR_RETURN(secagg::SecAggServer server, secagg::SecAggServer::Create(p));
  r->server_ = std::make_unique<secagg::SecAggServer>(std::move(server));
  for (uint32_t i = 0; i < n; ++i) r->index_of_[spec.task_ids[i]] = i;
  r->example_scale_ = spec.example_scale;
  r->step_timeout_s_ = spec.config.step_timeout_s();
  r->step_deadline_s_ = spec.now_s + r->step_timeout_s_;
  r->completed_.assign(n, -1);
  r->owed_.resize(n);
  for (v1::SecAggStepResponse& owed : r->owed_) owed.set_retry_after_ms(RetryMs(n));
  r->weight_.assign(n, 0.0);
  r->left_out_.assign(n, false);
  return r;
}

std::optional<uint32_t> SecAggRound::IndexOf(const std::string& task_id) const {
  auto it = index_of_.find(task_id);
  if (it == index_of_.end()) return std::nullopt;
  return it->second;
}

v1::SecAggTask SecAggRound::TaskInfo(uint32_t index) const {
  v1::SecAggTask info;
  *info.mutable_params() = params_;
  info.set_index(index);
  info.set_example_scale(example_scale_);
  return info;
}

absl::Status SecAggRound::CheckOpen(SecAggPhase phase, uint32_t index, uint32_t sender,
                                    const char* what) const {
  if (index >= completed_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("cohort index ", index, " out of range"));
  }
  if (phase_ != phase) {
    return absl::FailedPreconditionError(
        absl::StrCat("secure aggregation of round ", params_.round_id(), ": ", what,
                     " is not open (the round is at step '", PhaseName(phase_), "')"));
  }
  const int expected = static_cast<int>(phase) - 1;
  if (completed_[index] != expected) {
    return absl::FailedPreconditionError(absl::StrCat(
        "secure aggregation of round ", params_.round_id(), ": member ", index,
        completed_[index] > expected ? " already sent its " : " was dropped before ", what));
  }
  if (sender != index) {
    return absl::PermissionDeniedError(
        absl::StrCat(what, " names sender ", sender, ", not the task's ", index));
  }
  return absl::OkStatus();
}

void SecAggRound::Took(uint32_t index, SecAggPhase phase) {
  completed_[index] = static_cast<int>(phase);
  owed_[index].Clear();
  if (phase == SecAggPhase::kUnmask) {
    owed_[index].set_done(true);  // nothing more to do in this round
  } else {
    owed_[index].set_retry_after_ms(RetryMs(static_cast<uint32_t>(completed_.size())));
  }
}

absl::Status SecAggRound::Advertise(uint32_t index, const v1::SecAggAdvertise& message,
                                    absl::string_view client_id,
                                    absl::string_view signing_public_key) {
  FEDSCHED_RETURN_IF_ERROR(
      CheckOpen(SecAggPhase::kAdvertise, index, message.sender(), "advertise keys"));
  if (message.signer_id() != client_id) {
    return absl::UnauthenticatedError(absl::StrCat("the advertisement of member ", index,
                                                   " is signed as another client than the task's '",
                                                   client_id, "'"));
  }
  FEDSCHED_RETURN_IF_ERROR(server_->AddAdvertisement(message, signing_public_key));
  Took(index, SecAggPhase::kAdvertise);
  return absl::OkStatus();
}

absl::Status SecAggRound::ShareKeys(uint32_t index, const v1::SecAggShareKeys& message) {
  FEDSCHED_RETURN_IF_ERROR(
      CheckOpen(SecAggPhase::kShareKeys, index, message.sender(), "share keys"));
  FEDSCHED_RETURN_IF_ERROR(server_->AddShareKeys(message));
  Took(index, SecAggPhase::kShareKeys);
  return absl::OkStatus();
}

absl::Status SecAggRound::AddMaskedInput(uint32_t index, const v1::SecAggMaskedInput& input,
                                         double weight) {
  FEDSCHED_RETURN_IF_ERROR(
      CheckOpen(SecAggPhase::kMaskedInput, index, input.sender(), "masked input"));
  FEDSCHED_RETURN_IF_ERROR(server_->AddMaskedInput(input));
  Took(index, SecAggPhase::kMaskedInput);
  weight_[index] = weight;
  return absl::OkStatus();
}

absl::Status SecAggRound::Unmask(uint32_t index, const v1::SecAggUnmaskResponse& message) {
  FEDSCHED_RETURN_IF_ERROR(CheckOpen(SecAggPhase::kUnmask, index, message.sender(), "unmask"));
  FEDSCHED_RETURN_IF_ERROR(server_->AddUnmaskResponse(message));
  Took(index, SecAggPhase::kUnmask);
  ++unmask_answered_;
  return absl::OkStatus();
}

absl::StatusOr<v1::SecAggStepResponse> SecAggRound::NextFor(uint32_t index) const {
  if (index >= completed_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("cohort index ", index, " out of range"));
  }
  const int step = static_cast<int>(phase_);
  // A member that did not complete the step before the open one was dropped at that step.
  const bool behind = phase_ != SecAggPhase::kDone && completed_[index] < step - 1;
  if (left_out_[index]) {
    return absl::FailedPreconditionError(
        absl::StrCat("secure aggregation of round ", params_.round_id(), ": member ", index,
                     " was left out: neighbours could not authenticate its key shares"));
  }
  if (behind || (phase_ == SecAggPhase::kDone && completed_[index] < 2)) {
    return absl::FailedPreconditionError(
        absl::StrCat("secure aggregation of round ", params_.round_id(), ": member ", index,
                     " was dropped (the round is at step '", PhaseName(phase_), "')"));
  }
  return owed_[index];
}

bool SecAggRound::dropped(uint32_t index) const {
  if (index >= completed_.size() || left_out_[index]) return true;
  // Steps before the open one are closed; at kDone every step up to the masked input is.
  const int closed_steps = phase_ == SecAggPhase::kDone ? 3 : static_cast<int>(phase_);
  return completed_[index] < std::min(closed_steps, 3) - 1;
}

absl::StatusOr<bool> SecAggRound::AdvanceKeySteps(double now_s,
                                                  const std::function<bool(uint32_t)>& alive) {
  if (phase_ != SecAggPhase::kAdvertise && phase_ != SecAggPhase::kShareKeys) return false;
  const int waiting_for = static_cast<int>(phase_) - 1;  // members that completed the step before
  bool all_in = true;
  for (uint32_t i = 0; i < completed_.size() && all_in; ++i) {
    if (completed_[i] == waiting_for && alive(i)) all_in = false;
  }
  if (!all_in && now_s < step_deadline_s_) return false;
  if (phase_ == SecAggPhase::kAdvertise) {
    FEDSCHED_ASSIGN_OR_RETURN(std::vector<v1::SecAggKeyDirectory> directories,
                              server_->CloseAdvertisements());
    for (v1::SecAggKeyDirectory& d : directories) {
      const uint32_t to = d.recipient();
      owed_[to].Clear();
      *owed_[to].mutable_key_directory() = std::move(d);
    }
    phase_ = SecAggPhase::kShareKeys;
    step_deadline_s_ = now_s + step_timeout_s_;
    return true;
  }
  FEDSCHED_ASSIGN_OR_RETURN(std::vector<v1::SecAggRoutedShares> routed, server_->CloseShareKeys());
  for (v1::SecAggRoutedShares& r : routed) {
    const uint32_t to = r.recipient();
    owed_[to].Clear();
    *owed_[to].mutable_routed_shares() = std::move(r);
  }
  phase_ = SecAggPhase::kMaskedInput;
  step_deadline_s_ = kNever;
  return true;
}

absl::Status SecAggRound::BeginUnmasking(double now_s) {
  if (phase_ != SecAggPhase::kMaskedInput) {
    return absl::FailedPreconditionError(
        absl::StrCat("unmasking cannot start at step '", PhaseName(phase_), "'"));
  }
  phase_ = SecAggPhase::kDone;  // unless the requests go out below
  absl::StatusOr<std::vector<v1::SecAggUnmaskRequest>> requested = server_->RequestUnmasking();
  for (const auto& [member, accusers] : server_->accusations()) {
    if (completed_[member] == static_cast<int>(SecAggPhase::kMaskedInput)) left_out_[member] = true;
  }
  FEDSCHED_ASSIGN_OR_RETURN(std::vector<v1::SecAggUnmaskRequest> requests, std::move(requested));
  for (v1::SecAggUnmaskRequest& r : requests) {
    const uint32_t to = r.recipient();
    owed_[to].Clear();
    *owed_[to].mutable_unmask_request() = std::move(r);
  }
  unmask_asked_ = static_cast<int32_t>(requests.size());
  phase_ = SecAggPhase::kUnmask;
  step_deadline_s_ = now_s + step_timeout_s_;
  return absl::OkStatus();
}

bool SecAggRound::UnmaskingComplete(double now_s) const {
  return phase_ == SecAggPhase::kUnmask &&
         (unmask_answered_ >= unmask_asked_ || now_s >= step_deadline_s_);
}

absl::StatusOr<SecAggRound::Result> SecAggRound::Finish() {
  if (phase_ != SecAggPhase::kUnmask) {
    return absl::FailedPreconditionError(
        absl::StrCat("the sum cannot be taken at step '", PhaseName(phase_), "'"));
  }
  phase_ = SecAggPhase::kDone;
  step_deadline_s_ = kNever;
  for (v1::SecAggStepResponse& owed : owed_) {
    owed.Clear();
    owed.set_done(true);
  }
  Result result;
  FEDSCHED_ASSIGN_OR_RETURN(result.sum, server_->CloseUnmasking());
  for (uint32_t i : result.sum.contributors) result.total_weight += weight_[i];
  return result;
}

}  // namespace fedsched::round
