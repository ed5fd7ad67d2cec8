#include "server/planner/planner.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/compress/update_codec.h"
#include "common/status_macros.h"
#include "server/planner/cache_plan.h"
#include "server/planner/leaving_first.h"
#include "server/planner/policy_registry.h"
#include "server/planner/workload.h"

namespace fedsched::planner {
namespace {

using profile::ClientState;
using profile::RoundTimePredictor;

constexpr int32_t kStateVersion = 1;

}  // namespace

absl::StatusOr<std::unique_ptr<Planner>> Planner::Create(const PlannerOptions& options,
                                                         profile::ProfileBook* book) {
  if (book == nullptr) return absl::InvalidArgumentError("Planner needs a ProfileBook");
  FEDSCHED_RETURN_IF_ERROR(ValidatePlannerOptions(options));
  FEDSCHED_ASSIGN_OR_RETURN(RoundTimePredictor predictor,
                            RoundTimePredictor::Create(options.predictor));
  FEDSCHED_ASSIGN_OR_RETURN(fit::MemoryPredictor memory,
                            fit::MemoryPredictor::Create(options.fit.predictor));
  FEDSCHED_ASSIGN_OR_RETURN(const SelectionPolicyKind* kind, PlannerSelectionPolicy(options));
  std::unique_ptr<Planner> planner(
      new Planner(options, book, kind, std::move(predictor), std::move(memory)));
  FEDSCHED_ASSIGN_OR_RETURN(planner->policy_, kind->Create({.options = planner->options_,
                                                            .pacer = &planner->pacer_,
                                                            .experience = &planner->experience_}));
  return planner;
}

Planner::Planner(const PlannerOptions& options, profile::ProfileBook* book,
                 const SelectionPolicyKind* kind, RoundTimePredictor predictor,
                 fit::MemoryPredictor memory)
    : options_(options),
      book_(book),
      kind_(kind),
      predictor_(std::move(predictor)),
      memory_(std::move(memory)),
      default_slots_(std::max(1, CeilToInt(options.clients_per_round * options.overcommit))),
      pacer_(options.oort) {}

Planner::~Planner() = default;

int32_t Planner::StepsFor(int64_t num_samples) const {
  return LocalStepsFor(options_, num_samples);
}

// The recipe: check the request, select with the configured policy, turn the selection into
// tasks, forecast the close, then commit (the only step that changes state).
absl::StatusOr<RoundPlan> Planner::PlanRound(const PlanRequest& request) {
  FEDSCHED_RETURN_IF_ERROR(CheckRequest(request));
  RoundPlan plan = StartPlan(request);
  std::mt19937_64 rng = RoundRng(request.round, plan.attempt);
  RngDraws draws(rng);
  const size_t slots = request.max_participants > 0 ? static_cast<size_t>(request.max_participants)
                                                    : static_cast<size_t>(default_slots_);
  const PlanRequest& narrowed = NarrowCandidates(request, slots, rng);
  const CandidateEvaluator evaluator(options_, *book_, predictor_, memory_, narrowed);
  const RoundContext round{.request = narrowed,
                           .options = options_,
                           .book = *book_,
                           .evaluator = evaluator,
                           .slots = slots,
                           .attempt = plan.attempt,
                           .rounds_planned = rounds_planned_,
                           .rng = rng,
                           .draws = draws};
  pool_.BeginRound(static_cast<size_t>(book_->size()));
  policy_->Select(round, &pool_, &plan);
  if (options_.update_dropout_high > 0) AssignUpdateDropout(evaluator);
  if (options_.extend_workload_beta > 0 || options_.extend_workload_leaving_beta > 0) {
    ExtendWorkloads(evaluator, narrowed);
  }
  AddParticipants(evaluator, &plan);
  AddPassedOver(evaluator, &plan);
  ForecastClose(&plan);
  Commit(evaluator, request, plan);
  return plan;
}

// Without leaving first the request itself; with it a copy whose candidates are the narrowed
// list (docs/ALGORITHMS.md §2.7), valid until the next PlanRound.
const PlanRequest& Planner::NarrowCandidates(const PlanRequest& request, size_t slots,
                                             std::mt19937_64& rng) {
  if (!options_.leaving_first.enabled) return request;
  NarrowToLeavingFirst(options_.leaving_first, request.candidates, *book_, request.availability,
                       options_.min_online_probability, request.round, request.now_s,
                       LeavingWindowS(), slots, rng, &narrowed_candidates_);
  narrowed_request_ = request;
  narrowed_request_.candidates = narrowed_candidates_;
  return narrowed_request_;
}

absl::Status Planner::CheckRequest(const PlanRequest& request) const {
  if (request.round < 1) {
    return absl::InvalidArgumentError(absl::StrCat("round must be >= 1, got ", request.round));
  }
  if (request.round < last_planned_round_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "round ", request.round, " is below the last planned round ", last_planned_round_));
  }
  if (!std::isfinite(request.now_s)) return absl::InvalidArgumentError("now_s is not finite");
  if (request.model_bytes < 0 || request.max_participants < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model_bytes and max_participants must be >= 0, got ", request.model_bytes,
                     " and ", request.max_participants));
  }
  const int64_t book_size = book_->size();
  for (ClientIndex idx : request.candidates) {
    if (idx >= book_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("candidate index ", idx, " >= number of clients ", book_size));
    }
  }
  return absl::OkStatus();
}

RoundPlan Planner::StartPlan(const PlanRequest& request) const {
  RoundPlan plan;
  plan.round = request.round;
  plan.attempt = request.round == last_planned_round_ ? plan_attempts_ + 1 : 1;
  plan.planned_at_s = request.now_s;
  plan.deadline_s = options_.round_deadline_s;
  return plan;
}

// Randomness depends only on (seed, round, attempt): a restarted planner draws the same.
std::mt19937_64 Planner::RoundRng(int64_t round, int32_t attempt) const {
  std::seed_seq seq{static_cast<uint32_t>(options_.seed),
                    static_cast<uint32_t>(options_.seed >> 32), static_cast<uint32_t>(round),
                    static_cast<uint32_t>(static_cast<uint64_t>(round) >> 32),
                    static_cast<uint32_t>(attempt)};
  return std::mt19937_64(seq);
}

// One task per chosen candidate, in selection order, then sorted fastest first (stable).
void Planner::AddParticipants(const CandidateEvaluator& evaluator, RoundPlan* plan) const {
  plan->participants.reserve(pool_.num_chosen());
  for (uint32_t pos : pool_.chosen()) {
    plan->participants.push_back(MakeTask(evaluator, pool_[pos]));
  }
  std::stable_sort(plan->participants.begin(), plan->participants.end(),
                   [](const PlannedTask& a, const PlannedTask& b) {
                     return a.predicted_seconds < b.predicted_seconds;
                   });
}

// The close a fast participant's extra steps may run up to: under first-K closing the K-th
// smallest prediction among the participants (PyramidFL's round_duration, the K-th fastest
// completion), never beyond workload_fit_fraction x round_deadline_s (the margin workload
// sizing keeps); under deadline closing that bound itself.
double Planner::LeavingWindowS() const {
  return options_.leaving_first.window_s > 0 ? options_.leaving_first.window_s
                                             : last_round_length_s_;
}

void Planner::ExtendWorkloads(const CandidateEvaluator& evaluator, const PlanRequest& request) {
  const double bound = options_.workload_fit_fraction * options_.round_deadline_s;
  double close_s = bound;
  if (options_.round_closing != v1::ROUND_CLOSING_DEADLINE) {
    std::vector<double> t;
    t.reserve(pool_.num_chosen());
    for (uint32_t pos : pool_.chosen()) t.push_back(pool_[pos].t_s);
    if (t.empty()) return;
    const size_t k = std::min<size_t>(static_cast<size_t>(options_.clients_per_round), t.size());
    std::nth_element(t.begin(), t.begin() + static_cast<ptrdiff_t>(k - 1), t.end());
    close_s = std::min(t[k - 1], bound);
  }
  const double leaving_beta = options_.extend_workload_leaving_beta;
  const double window_s = LeavingWindowS();
  for (uint32_t pos : pool_.chosen()) {
    Candidate& c = pool_[pos];
    // A participant that will not be back soon gets its own share of the idle time
    // (docs/ALGORITHMS.md §10); the oracle is asked only when that share differs.
    double beta = options_.extend_workload_beta;
    if (leaving_beta > 0 && leaving_beta != beta &&
        PredictedLeaving(request.availability, c.index, options_.min_online_probability,
                         request.now_s, window_s)) {
      beta = leaving_beta;
    }
    evaluator.ExtendWorkload(close_s, beta, &c);
  }
}

void Planner::AssignUpdateDropout(const CandidateEvaluator& evaluator) {
  std::vector<uint32_t> order(pool_.chosen().begin(), pool_.chosen().end());
  // The authors rank by their reward (Oort's utility); ties keep the selection order.
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return pool_[a].utility > pool_[b].utility; });
  const double low = options_.update_dropout_low;
  const double high = options_.update_dropout_high;
  const double step = (high - low) / std::max(1, options_.clients_per_round);
  for (size_t r = 0; r < order.size(); ++r) {
    Candidate& c = pool_[order[r]];
    c.dropout = std::min(high, low + static_cast<double>(r) * step);
    c.dropout_saved_s = c.dropout * evaluator.UploadSeconds(c);
    c.t_s = std::max(c.t_s - c.dropout_saved_s, 0.0);
  }
}

PlannedTask Planner::MakeTask(const CandidateEvaluator& evaluator, const Candidate& c) const {
  const ClientState& s = book_->state(c.index);
  PlannedTask t;
  t.index = c.index;
  t.client_id = book_->profile(c.index).client_id();
  t.local_steps = c.steps;
  t.batch_size = c.batch;
  t.predicted_seconds = c.t_s;
  t.update_dropout = c.dropout;
  v1::SelectionReason& r = t.reason;
  r.set_client_id(t.client_id);
  r.set_policy(kind_->record_value());
  r.set_policy_name(std::string(kind_->name()));
  r.set_speed_penalty(1.0);
  policy_->Describe(c, s, &r);
  r.set_explored(c.explore_pick);
  r.set_predicted_seconds(c.t_s);
  r.set_local_steps(c.steps);
  r.set_workload_reduced(c.steps < StepsFor(s.num_samples));
  r.set_note(NoteText(static_cast<Note>(c.note)));
  r.set_batch_size(c.batch);
  r.set_batch_reduced(c.batch < options_.batch_size);
  const v1::DeviceProfile& device = book_->profile(c.index).device();
  r.set_memory_budget_bytes(device.memory_budget_bytes());
  // Predicted only for devices that declare a budget (the record of others stays as before).
  if (options_.fit.model.parameters > 0 && device.memory_budget_bytes() > 0) {
    r.set_predicted_peak_bytes(
        std::llround(memory_.Predict(device.device_model(), options_.fit.model, c.batch)));
  }
  // Recorded only when compression is configured (the record of others stays as before); the
  // level itself only when adaptive: the engine then hands it to the task (else the uplink).
  const CompressionOptions& compression = options_.compression;
  if (compression.adaptive || !compress::IsUncompressed(compression.levels[0])) {
    if (compression.adaptive) *r.mutable_compression() = compression.levels[c.level];
    r.set_predicted_upload_bytes(evaluator.UploadBytes(c.level));
  }
  t.cache_plan = MakeCachePlan(options_.cache, c.batch, s, c.steps, false);
  return t;
}

// One record per client refused for memory, in the order refused, at most kMaxPassedOver.
void Planner::AddPassedOver(const CandidateEvaluator& evaluator, RoundPlan* plan) const {
  absl::flat_hash_map<ClientIndex, bool> seen;
  for (ClientIndex index : evaluator.unfit()) {
    if (plan->passed_over.size() >= kMaxPassedOver) break;
    if (!seen.emplace(index, true).second) continue;
    const v1::ClientProfile& p = book_->profile(index);
    v1::SelectionReason& r = plan->passed_over.emplace_back();
    r.set_client_id(p.client_id());
    r.set_policy(kind_->record_value());
    r.set_policy_name(std::string(kind_->name()));
    r.set_note("does not fit");
    r.set_memory_budget_bytes(p.device().memory_budget_bytes());
    r.set_batch_size(options_.fit.min_batch_size);
    r.set_predicted_peak_bytes(
        std::llround(evaluator.PredictedPeakBytes(index, options_.fit.min_batch_size)));
  }
}

void Planner::ForecastClose(RoundPlan* plan) const {
  plan->target_updates =
      static_cast<int32_t>(std::min<size_t>(options_.clients_per_round, plan->participants.size()));
  plan->expected_close_s = ForecastClosing(plan->participants, plan->target_updates,
                                           options_.round_closing, options_.round_deadline_s)
                               .expected_close_s;
}

// From here on the plan is handed out: every participant is marked busy in the book and its
// prediction is kept to score and learn from its outcome.
void Planner::Commit(const CandidateEvaluator& evaluator, const PlanRequest& request,
                     const RoundPlan& plan) {
  for (uint32_t pos : pool_.chosen()) {
    const Candidate& c = pool_[pos];
    // Cannot fail: the index was validated and the round is >= 1.
    (void)book_->OnTaskAssigned(c.index, request.round, request.now_s);
    InFlight& f = in_flight_[c.index];
    f.round = request.round;
    f.planned_at_s = request.now_s;
    f.predicted_s = c.t_s;
    f.inputs = book_->Inputs(c.index, request.model_bytes, evaluator.UploadBytes(c.level),
                             static_cast<int64_t>(c.batch) * c.steps);
    f.exploited = c.exploited;
    f.measured = book_->state(c.index).measured;
    f.batch = c.batch;
    f.predicted_peak_bytes = options_.fit.model.parameters > 0
                                 ? memory_.Predict(book_->profile(c.index).device().device_model(),
                                                   options_.fit.model, c.batch)
                                 : 0;
  }
  if (plan.attempt == 1) ++rounds_planned_;
  last_planned_round_ = request.round;
  last_planned_at_s_ = request.now_s;
  plan_attempts_ = plan.attempt;
}

absl::Status Planner::OnUpdate(ClientIndex index, int64_t round, const v1::UpdateMetrics& metrics,
                               const profile::TaskTiming& timing, double now_s) {
  if (index >= book_->size()) {
    return absl::NotFoundError(absl::StrCat("unknown client index ", index));
  }
  auto it = in_flight_.find(index);
  const bool matched = it != in_flight_.end() && it->second.round == round;
  profile::TaskTiming t = timing;
  if (t.completion_s == 0 && matched) t.completion_s = now_s - it->second.planned_at_s;
  FEDSCHED_RETURN_IF_ERROR(book_->OnTaskSucceeded(index, metrics, t, now_s));
  if (matched) {
    LearnPeak(index, it->second, metrics.peak_memory_bytes());
    predictor_.RecordError(it->second.predicted_s, t.completion_s);
    // A task planned from priors (the client never measured) says how wrong the prior was,
    // not how the measured terms relate to real time: fitting it would teach the regression
    // the prior's error (a 10 ms/sample default against 1 ms real scaled the compute weight
    // to 0.05 for every later, measured task).
    if (it->second.measured) predictor_.Observe(it->second.inputs, t.completion_s);
    if (it->second.exploited) pacer_.RecordExploitedUtility(metrics.statistical_utility());
    in_flight_.erase(it);
  }
  experience_.OnCompleted(index, t.completion_s, metrics.statistical_utility(),
                          options_.fedcase.speed_weight);
  experience_.top_ratio().AddLoss(metrics.mean_loss());
  return absl::OkStatus();
}

absl::Status Planner::OnTaskFailed(ClientIndex index, int64_t round, profile::TaskFailure failure,
                                   double now_s) {
  if (index >= book_->size()) {
    return absl::NotFoundError(absl::StrCat("unknown client index ", index));
  }
  double elapsed = 0;
  auto it = in_flight_.find(index);
  if (it != in_flight_.end() && it->second.round == round) {
    elapsed = now_s - it->second.planned_at_s;
    in_flight_.erase(it);
  }
  return book_->OnTaskFailed(index, failure, elapsed, now_s);
}

absl::Status Planner::OnOutOfMemory(ClientIndex index, int64_t round, int64_t peak_bytes,
                                    double now_s) {
  if (index >= book_->size()) {
    return absl::NotFoundError(absl::StrCat("unknown client index ", index));
  }
  auto it = in_flight_.find(index);
  if (it != in_flight_.end() && it->second.round == round) LearnPeak(index, it->second, peak_bytes);
  return OnTaskFailed(index, round, profile::TaskFailure::kDropped, now_s);
}

void Planner::LearnPeak(ClientIndex index, const InFlight& f, int64_t peak_bytes) {
  if (peak_bytes <= 0 || f.predicted_peak_bytes <= 0) return;
  const auto measured = static_cast<double>(peak_bytes);
  memory_.RecordError(f.predicted_peak_bytes, measured);
  const auto prior = static_cast<double>(fit::AnalyticPeakBytes(options_.fit.model, f.batch));
  // Cannot fail: both are positive and finite.
  (void)memory_.Observe(book_->profile(index).device().device_model(), prior, measured);
}

RoundSummary Planner::OnRoundFinished(int64_t round, bool committed, double now_s,
                                      bool held_to_deadline) {
  RoundSummary summary;
  summary.round = round;
  std::vector<std::pair<ClientIndex, double>> stragglers;
  for (const auto& [index, f] : in_flight_) {
    if (f.round <= round) stragglers.emplace_back(index, now_s - f.planned_at_s);
  }
  // Sorted so that the book sees the same order on every run (hash order is per process).
  std::sort(stragglers.begin(), stragglers.end());
  for (const auto& [index, elapsed] : stragglers) {
    in_flight_.erase(index);
    (void)book_->OnTaskFailed(
        index,
        held_to_deadline ? profile::TaskFailure::kMissedDeadline : profile::TaskFailure::kStraggler,
        elapsed, now_s);
  }
  summary.stragglers = static_cast<int32_t>(stragglers.size());
  if (round == last_planned_round_ && last_planned_at_s_.has_value() &&
      now_s >= *last_planned_at_s_) {
    last_round_length_s_ = now_s - *last_planned_at_s_;
  }
  const RoundTimePredictor::RoundError error = predictor_.FinishRound();
  summary.predictor_mape = error.mape;
  summary.predictions_scored = error.count;
  const fit::MemoryPredictor::RoundError memory_error = memory_.FinishRound();
  summary.memory_mape = memory_error.mape;
  summary.memory_scored = memory_error.count;
  summary.exploit_utility = pacer_.FinishRound(committed);
  experience_.top_ratio().FinishRound(committed, now_s);
  summary.epsilon = pacer_.epsilon();
  summary.round_threshold_percent = pacer_.round_threshold_percent();
  return summary;
}

v1::PlannerState Planner::ExportState() const {
  v1::PlannerState s;
  s.set_version(kStateVersion);
  s.set_policy(kind_->record_value());
  s.set_last_planned_round(last_planned_round_);
  s.set_plan_attempts(plan_attempts_);
  s.set_rounds_planned(rounds_planned_);
  s.set_last_round_length_s(last_round_length_s_);
  pacer_.ExportTo(s.mutable_oort());
  // Per-client experiences are persisted only where FedCaSe selects with them: they are
  // learned under every policy, but a 100k-client state written at every commit is not free
  // (a run restarted under FedCaSe after another policy starts them cold).
  experience_.ExportTo(s.mutable_fedcase(), kind_->selects_by_experience() ? book_ : nullptr);
  *s.mutable_predictor() = predictor_.ExportState();
  *s.mutable_fit() = memory_.ExportState();
  return s;
}

absl::Status Planner::ImportState(const v1::PlannerState& s) {
  if (s.version() != kStateVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("planner state version ", s.version(), " is not ", kStateVersion));
  }
  if (s.last_planned_round() < 0 || s.plan_attempts() < 0 || s.rounds_planned() < 0 ||
      !(s.last_round_length_s() >= 0) || !std::isfinite(s.last_round_length_s())) {
    return absl::InvalidArgumentError("planner state has an out-of-range value");
  }
  FEDSCHED_RETURN_IF_ERROR(OortPacer::Validate(s.oort()));
  FEDSCHED_RETURN_IF_ERROR(ExperienceTracker::Validate(s.fedcase()));
  FEDSCHED_ASSIGN_OR_RETURN(RoundTimePredictor predictor,
                            RoundTimePredictor::Create(options_.predictor));
  FEDSCHED_RETURN_IF_ERROR(predictor.ImportState(s.predictor()));
  FEDSCHED_ASSIGN_OR_RETURN(fit::MemoryPredictor memory,
                            fit::MemoryPredictor::Create(options_.fit.predictor));
  FEDSCHED_RETURN_IF_ERROR(memory.ImportState(s.fit()));

  predictor_ = std::move(predictor);
  memory_ = std::move(memory);
  last_planned_round_ = s.last_planned_round();
  plan_attempts_ = s.plan_attempts();
  rounds_planned_ = s.rounds_planned();
  last_round_length_s_ = s.last_round_length_s();
  pacer_.ImportFrom(s.oort());
  experience_.ImportFrom(s.fedcase(), book_);
  in_flight_.clear();
  return absl::OkStatus();
}

}  // namespace fedsched::planner
