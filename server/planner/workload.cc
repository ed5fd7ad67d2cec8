#include "server/planner/workload.h"

#include <algorithm>
#include <cmath>

namespace fedsched::planner {

using profile::ClientState;
using profile::LinearPrediction;
using profile::RoundTimePredictor;

int32_t CeilToInt(double x) { return static_cast<int32_t>(std::ceil(x - kCeilSlack)); }

int32_t LocalStepsFor(const PlannerOptions& options, int64_t num_samples) {
  if (options.local_steps > 0) return options.local_steps;
  const int64_t per_epoch =
      (std::max<int64_t>(num_samples, 1) + options.batch_size - 1) / options.batch_size;
  return static_cast<int32_t>(std::clamp<int64_t>(per_epoch * options.local_epochs, 1,
                                                  std::max(options.max_local_steps, 1)));
}

namespace {

// The unsized local steps of a client with `num_samples` at `batch` samples per step: its
// configured steps at options.batch_size, as more, smaller steps when the batch was lowered to fit
// memory (the task keeps its work, ceil(B x steps / b); docs/guides/RESOURCE_FIT.md).
int32_t FullStepsAt(const PlannerOptions& options, int64_t num_samples, int32_t batch) {
  const int64_t samples =
      static_cast<int64_t>(LocalStepsFor(options, num_samples)) * options.batch_size;
  return static_cast<int32_t>((samples + batch - 1) / batch);
}

}  // namespace

// A straggler bound is scaled with the workload: the task it comes from had ~full_steps.
struct CandidateEvaluator::StepSeconds {
  LinearPrediction lp;
  double batch = 0;       // samples per step
  double censored_s = 0;  // straggler bound, seconds; 0 = none
  double full_steps = 0;  // the unsized steps

  double operator()(int32_t steps) const {
    double t = std::max(lp.fixed_s + lp.per_sample_s * batch * steps,
                        RoundTimePredictor::kMinPredictionSeconds);
    if (censored_s > 0) t = std::max(t, censored_s * steps / full_steps);
    return t;
  }
};

CandidateEvaluator::CandidateEvaluator(const PlannerOptions& options,
                                       const profile::ProfileBook& book,
                                       const RoundTimePredictor& predictor,
                                       const fit::MemoryPredictor& memory,
                                       const PlanRequest& request)
    : options_(options),
      book_(book),
      predictor_(predictor),
      memory_(memory),
      request_(request),
      upload_bytes_(
          UploadBytesPerLevel(options.compression.levels, request.model_bytes, request.model)) {}

void CandidateEvaluator::Evaluate(ClientIndex index, Candidate* c) const {
  const ClientState& s = book_.state(index);
  c->index = index;
  const int32_t unfit_steps = LocalStepsFor(options_, s.num_samples);
  int32_t full_steps = unfit_steps;
  c->tried = s.last_selected_round > 0;
  c->batch = options_.batch_size;
  c->mem_fits = true;
  const FitOptions& fit = options_.fit;
  if (fit.enabled && fit.model.parameters > 0) {
    // From the state, not the profile: the planner evaluates every candidate of every round,
    // and the profile's device message is a cache miss away (three at a million clients).
    const int32_t b =
        memory_.FitBatch(book_.device_model_name(s.device_model), fit.model, options_.batch_size,
                         fit.min_batch_size, s.memory_budget_bytes, fit.margin, nullptr);
    c->mem_fits = b > 0;
    if (b > 0 && b < options_.batch_size) {
      // Keep the task's work (batch x steps samples) when its batch is lowered to fit memory:
      // more, smaller steps (docs/guides/RESOURCE_FIT.md). Fewer samples trained cost accuracy.
      c->batch = b;
      full_steps = FullStepsAt(options_, s.num_samples, b);
    }
  }
  c->level = 0;
  const StepSeconds predict = options_.compression.adaptive
                                  ? ChooseLevel(index, c->batch, full_steps, &c->level)
                                  : PredictorFor(index, c->batch, full_steps, 0);
  c->steps = full_steps;
  c->t_s = predict(full_steps);
  if (options_.workload_sizing) {
    SizeWorkload(predict, full_steps, c);
  } else {
    c->fits = c->t_s <= options_.round_deadline_s;
  }
  if (s.has_utility) {
    c->utility = s.statistical_utility;
  } else {
    // Oort's registration utility: min(|D_i|, batch x local steps) (docs/ALGORITHMS.md §3).
    const double slots = static_cast<double>(options_.batch_size) * unfit_steps;
    c->utility = s.num_samples > 0 ? std::min<double>(s.num_samples, slots) : slots;
  }
}

CandidateEvaluator::StepSeconds CandidateEvaluator::PredictorFor(ClientIndex index, int32_t batch,
                                                                 int32_t full_steps,
                                                                 uint8_t level) const {
  return StepSeconds{.lp = predictor_.PredictLinear(
                         book_.Inputs(index, request_.model_bytes, upload_bytes_[level], 0)),
                     .batch = static_cast<double>(batch),
                     .censored_s = book_.state(index).censored_duration_s,
                     .full_steps = static_cast<double>(full_steps)};
}

// Client-aware compression (docs/ALGORITHMS.md §13): the least compression whose prediction for
// the full work meets the deadline (the share of it sizing aims at when sizing is on), so that
// a slow link compresses before its work is cut.
CandidateEvaluator::StepSeconds CandidateEvaluator::ChooseLevel(ClientIndex index, int32_t batch,
                                                                int32_t full_steps,
                                                                uint8_t* level) const {
  const double bound =
      options_.round_deadline_s * (options_.workload_sizing ? options_.workload_fit_fraction : 1.0);
  const auto last = static_cast<uint8_t>(upload_bytes_.size() - 1);
  for (uint8_t l = 0;; ++l) {
    const StepSeconds predict = PredictorFor(index, batch, full_steps, l);
    if (l == last || predict(full_steps) <= bound) {
      *level = l;
      return predict;
    }
  }
}

double CandidateEvaluator::UploadSeconds(const Candidate& c) const {
  const double kbps = book_.ExpectedUploadKbps(c.index);
  if (!(kbps > 0)) return 0;
  return static_cast<double>(upload_bytes_[c.level]) * 8.0 / 1000.0 / kbps;
}

bool CandidateEvaluator::ExtendWorkload(double close_s, double beta, Candidate* c) const {
  if (!(beta > 0) || !(close_s > c->t_s) || c->steps < 1) return false;
  // The censored straggler bound scales with the steps of the task it came from: the unsized
  // steps at this batch, as in Evaluate.
  const StepSeconds predict =
      PredictorFor(c->index, c->batch,
                   FullStepsAt(options_, book_.state(c->index).num_samples, c->batch), c->level);
  // Seconds of one more step; the prediction's floors can make the difference 0 for a tiny
  // task, so the linear term stands in for it.
  double per_step = predict(c->steps + 1) - predict(c->steps);
  if (!(per_step > 0)) per_step = predict.lp.per_sample_s * predict.batch;
  if (!(per_step > 0)) return false;
  // PyramidFL: extra iterations = beta x floor(idle / seconds per iteration), the ratio capped
  // at 1 + 10 (max_workload_factor).
  const double extra = std::floor(beta * std::floor((close_s - c->t_s) / per_step));
  const double cap = std::min(std::floor(options_.max_workload_factor * c->steps),
                              static_cast<double>(std::max(options_.max_local_steps, 1)));
  const double steps = std::min(c->steps + extra, cap);
  if (!(steps > c->steps)) return false;
  Candidate extended = *c;
  extended.steps = static_cast<int32_t>(steps);
  extended.t_s = predict(extended.steps) - c->dropout_saved_s;
  if (!PredictedOnline(extended)) return false;
  *c = extended;
  return true;
}

void CandidateEvaluator::SizeWorkload(const StepSeconds& predict, int32_t full_steps,
                                      Candidate* c) const {
  const double deadline = options_.round_deadline_s;
  const double full = full_steps;
  const int32_t min_steps = std::min(options_.min_local_steps, full_steps);
  const double target = options_.workload_fit_fraction * deadline;
  if (c->t_s > target) {
    double fit = full;
    const double per_step = predict.lp.per_sample_s * predict.batch;
    if (per_step > 0) fit = std::floor((target - predict.lp.fixed_s) / per_step);
    if (predict.censored_s > 0) fit = std::min(fit, std::floor(target * full / predict.censored_s));
    c->steps = static_cast<int32_t>(std::clamp(fit, static_cast<double>(min_steps), full));
    if (c->steps < full_steps) c->t_s = predict(c->steps);
  }
  c->fits = (c->steps > min_steps ? predict(min_steps) : c->t_s) <= deadline;
}

bool CandidateEvaluator::PredictedOnline(const Candidate& c) const {
  if (request_.availability == nullptr) return true;
  const double p =
      request_.availability->ProbabilityOnline(c.index, request_.now_s, request_.now_s + c.t_s);
  return p >= options_.min_online_probability;  // false for NaN
}

bool CandidateEvaluator::Admissible(const Candidate& c) const {
  if (!c.mem_fits) {
    unfit_.push_back(c.index);
    return false;
  }
  return PredictedOnline(c);
}

double CandidateEvaluator::PredictedPeakBytes(ClientIndex index, int32_t batch) const {
  if (options_.fit.model.parameters <= 0) return 0;
  return memory_.Predict(book_.profile(index).device().device_model(), options_.fit.model, batch);
}

}  // namespace fedsched::planner
