// Evaluating one candidate for a round: its local work (docs/ALGORITHMS.md §2), its predicted
// completion seconds (§1), the optional workload sizing that lowers a slow client's local steps
// (§2), its statistical utility or Oort's registration utility (§3), and whether it is predicted
// to stay online until it finishes (§2).
#ifndef FEDSCHED_SERVER_PLANNER_WORKLOAD_H_
#define FEDSCHED_SERVER_PLANNER_WORKLOAD_H_

#include <cstdint>
#include <vector>

#include "server/fit/memory_predictor.h"
#include "server/planner/candidate_pool.h"
#include "server/planner/planner_options.h"
#include "server/planner/round_plan.h"
#include "server/profile/profile_book.h"
#include "server/profile/round_time.h"

namespace fedsched::planner {

// Slack of CeilToInt: ceil() of products such as 10 x 1.3 = 13.000000000000002 must give 13.
inline constexpr double kCeilSlack = 1e-9;

// ceil(x - kCeilSlack) as an int32 (docs/ALGORITHMS.md §2, "slots"). x must fit an int32.
int32_t CeilToInt(double x);

// Local steps of a task for a client with `num_samples` samples, before sizing
// (docs/ALGORITHMS.md §2): options.local_steps when > 0, else local_epochs x
// ceil(max(num_samples, 1) / batch_size), clamped to [1, 2^30].
int32_t LocalStepsFor(const PlannerOptions& options, int64_t num_samples);

// Evaluates the candidates of one PlanRequest. Holds references to its arguments, which must
// outlive it (one PlanRound call). Const and deterministic: the same inputs give bit-identical
// candidates.
class CandidateEvaluator {
 public:
  CandidateEvaluator(const PlannerOptions& options, const profile::ProfileBook& book,
                     const profile::RoundTimePredictor& predictor,
                     const fit::MemoryPredictor& memory, const PlanRequest& request);

  // Fills every field of `c` a policy ranks by, for client `index` (< book.size()):
  //   batch, mem_fits  with fit checks on (options.fit.enabled, model features known) and a
  //           declared memory budget: MemoryPredictor::FitBatch over the device model
  //           (docs/ALGORITHMS.md §8); mem_fits = false when no batch >= min_batch_size fits;
  //           else the configured batch_size;
  //   steps   LocalStepsFor(num_samples); with workload_sizing, lowered (not below
  //           min(min_local_steps, those steps)) so that the prediction fits
  //           workload_fit_fraction x round_deadline_s;
  //   level   the compression level its upload is charged at (options.compression.levels):
  //           0 unless adaptive; adaptive: the first level at which its prediction for its
  //           full (unsized) steps is within round_deadline_s (with workload_sizing, within
  //           workload_fit_fraction x round_deadline_s, what sizing aims at), else the last
  //           (docs/ALGORITHMS.md §13); every field below is at that level;
  //   t_s     the predictor's seconds for `steps` (RoundTimePredictor::PredictLinear over
  //           ProfileBook::Inputs with request.model_bytes down and UploadBytes(level) up),
  //           floored at kMinPredictionSeconds and at the straggler bound
  //           censored_duration_s x steps / full steps;
  //   fits    predicted within round_deadline_s (at the fewest steps sizing allows);
  //   tried   selected before (last_selected_round > 0);
  //   utility the last reported statistical utility, else Oort's registration utility
  //           min(num_samples, batch_size x full steps) (batch_size x full steps when
  //           num_samples is 0) (Lai et al., OSDI 2021, section 4.1; docs/ALGORITHMS.md §3).
  // Leaves status, note, score, experience, exploited and explore_pick as they are.
  void Evaluate(ClientIndex index, Candidate* c) const;

  // Workload extension (PyramidFL, Li et al., MobiCom 2022: adaptive local iterations, as its
  // authors' prune_client_tasks computes them; docs/ALGORITHMS.md §10). With s the predicted
  // seconds of one more local step of `c` (chosen, evaluated by Evaluate) and `beta` in [0, 1]
  // the share of its idle time to fill, raises c->steps by
  // floor(beta x floor((close_s - c->t_s) / s)), capped at
  // floor(max_workload_factor x c->steps) and max_local_steps, and sets c->t_s to the new
  // prediction (less c->dropout_saved_s). Leaves `c` as it is when close_s <= c->t_s, when no whole
  // step fits, or when the availability oracle does not predict the client online until the
  // extended finish. Returns whether it extended.
  bool ExtendWorkload(double close_s, double beta, Candidate* c) const;

  // Predicted seconds of the upload of candidate `c` (UploadBytes(c.level)) at its client's
  // expected upload bandwidth (ProfileBook::ExpectedUploadKbps), for update dropout's saving.
  double UploadSeconds(const Candidate& c) const;

  // The bytes a participant at compression level `level` (< options.compression.levels.size())
  // uploads: UploadBytesPerLevel of the levels for request.model_bytes and request.model,
  // computed once when the evaluator is made.
  int64_t UploadBytes(uint8_t level) const { return upload_bytes_[level]; }

  // Whether request.availability (if any) gives the candidate at least min_online_probability
  // of being online at now_s + c.t_s (docs/ALGORITHMS.md §2). True without an oracle; false for
  // a NaN probability. Calls the oracle once.
  bool PredictedOnline(const Candidate& c) const;

  // Whether `c` may be tasked: c.mem_fits (a candidate that fits no batch is noted in unfit()
  // and refused) and PredictedOnline(c).
  bool Admissible(const Candidate& c) const;
  // Clients refused by Admissible for memory this round, in the order refused (a client
  // offered twice appears twice).
  const std::vector<ClientIndex>& unfit() const { return unfit_; }
  // Peak bytes predicted for client `index` at `batch` (0 when model features are unknown).
  double PredictedPeakBytes(ClientIndex index, int32_t batch) const;

 private:
  // Seconds of a task of `steps` local steps; see Evaluate.
  struct StepSeconds;
  // The seconds predictor of client `index` at `batch` samples per step, whose unsized task
  // has `full_steps` steps, uploading at compression `level`.
  StepSeconds PredictorFor(ClientIndex index, int32_t batch, int32_t full_steps,
                           uint8_t level) const;
  // The adaptive level of client `index` and its predictor (see Evaluate).
  StepSeconds ChooseLevel(ClientIndex index, int32_t batch, int32_t full_steps,
                          uint8_t* level) const;
  // Workload sizing of `c` (steps, t_s, fits) from its full steps; see Evaluate.
  void SizeWorkload(const StepSeconds& predict, int32_t full_steps, Candidate* c) const;

  const PlannerOptions& options_;
  const profile::ProfileBook& book_;
  const profile::RoundTimePredictor& predictor_;
  const fit::MemoryPredictor& memory_;
  const PlanRequest& request_;
  std::vector<int64_t> upload_bytes_;  // per compression level
  mutable std::vector<ClientIndex> unfit_;
};

}  // namespace fedsched::planner

#endif  // FEDSCHED_SERVER_PLANNER_WORKLOAD_H_
