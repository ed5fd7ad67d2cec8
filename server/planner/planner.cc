#include "server/planner/planner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace fedsched::planner {
namespace {

using profile::ClientState;
using profile::LinearPrediction;
using profile::RoundTimeInputs;
using profile::RoundTimePredictor;

constexpr int32_t kStateVersion = 1;
// ceil() of products such as 10 x 1.3 = 13.000000000000002 must give 13.
constexpr double kCeilSlack = 1e-9;
// Selection weights are floored here so that zero-score clients are still drawable (last).
constexpr double kMinWeight = 1e-12;

enum CandidateStatus : uint8_t { kAvailable = 0, kSelected = 1, kRejected = 2 };

int32_t CeilToInt(double x) { return static_cast<int32_t>(std::ceil(x - kCeilSlack)); }

// Uniform double in (0, 1) from the top 53 bits.
double Uniform01(std::mt19937_64& rng) {
  return (static_cast<double>(rng() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

// Uniform integer in [0, n), n >= 1 (multiply-shift; the bias is below 2^-53 for n < 2^11).
size_t UniformIndex(std::mt19937_64& rng, size_t n) {
  return static_cast<size_t>(
      (static_cast<unsigned __int128>(rng()) * static_cast<unsigned __int128>(n)) >> 64);
}

absl::Status OutOfRange(absl::string_view field, double value, absl::string_view range) {
  return absl::InvalidArgumentError(absl::StrCat(field, " must be ", range, ", got ", value));
}

absl::Status Validate(const PlannerOptions& o) {
  auto in = [](double v, double lo, double hi) { return std::isfinite(v) && v >= lo && v <= hi; };
  if (o.clients_per_round < 1) return OutOfRange("clients_per_round", o.clients_per_round, ">= 1");
  if (!(o.overcommit >= 1) || !std::isfinite(o.overcommit) ||
      o.clients_per_round * o.overcommit > 1e8) {
    return OutOfRange("selection.overcommit", o.overcommit, ">= 1 (and K x overcommit <= 1e8)");
  }
  const OortOptions& r = o.oort;
  if (!in(r.exploration_factor, 0, 1)) {
    return OutOfRange("selection.oort.exploration_factor", r.exploration_factor, "in [0, 1]");
  }
  if (!in(r.exploration_decay, 0, 1) || r.exploration_decay == 0) {
    return OutOfRange("selection.oort.exploration_decay", r.exploration_decay, "in (0, 1]");
  }
  if (!in(r.exploration_min, 0, 1)) {
    return OutOfRange("selection.oort.exploration_min", r.exploration_min, "in [0, 1]");
  }
  if (!in(r.round_threshold, 0, 100) || r.round_threshold == 0) {
    return OutOfRange("selection.oort.round_threshold", r.round_threshold, "in (0, 100]");
  }
  if (!in(r.round_penalty, 0, 1e6)) {
    return OutOfRange("selection.oort.round_penalty", r.round_penalty, ">= 0");
  }
  if (!in(r.clip_bound, 0, 1) || r.clip_bound == 0) {
    return OutOfRange("selection.oort.clip_bound", r.clip_bound, "in (0, 1]");
  }
  if (!in(r.cut_off_util, 0, 1e6)) {
    return OutOfRange("selection.oort.cut_off_util", r.cut_off_util, ">= 0");
  }
  if (r.pacer_step < 1) return OutOfRange("selection.oort.pacer_step", r.pacer_step, ">= 1");
  if (!in(r.pacer_delta, 0, 100) || r.pacer_delta == 0) {
    return OutOfRange("selection.oort.pacer_delta", r.pacer_delta, "in (0, 100]");
  }
  if (r.sample_window < 1) {
    return OutOfRange("selection.oort.sample_window", r.sample_window, ">= 1");
  }
  if (!in(o.fedcase.top_ratio, 0, 1e6)) {
    return OutOfRange("selection.fedcase.top_ratio", o.fedcase.top_ratio, ">= 0");
  }
  if (!in(o.fedcase.speed_weight, 0, 1)) {
    return OutOfRange("selection.fedcase.speed_weight", o.fedcase.speed_weight, "in [0, 1]");
  }
  if (o.fedcase.base_policy != v1::FedCaseConfig::BASE_POLICY_OORT &&
      o.fedcase.base_policy != v1::FedCaseConfig::BASE_POLICY_RANDOM) {
    return OutOfRange("selection.fedcase.base_policy", o.fedcase.base_policy,
                      "BASE_POLICY_OORT or BASE_POLICY_RANDOM");
  }
  if (!in(o.cache.capacity_fraction, 0, 1) || o.cache.capacity_fraction == 0) {
    return OutOfRange("cache.capacity_fraction", o.cache.capacity_fraction, "in (0, 1]");
  }
  if (o.cache.replication_factor < 1) {
    return OutOfRange("cache.replication_factor", o.cache.replication_factor, ">= 1");
  }
  if (o.min_local_steps < 1) {
    return OutOfRange("selection.min_local_steps", o.min_local_steps, ">= 1");
  }
  if (!in(o.workload_fit_fraction, 0, 1) || o.workload_fit_fraction == 0) {
    return OutOfRange("workload_fit_fraction", o.workload_fit_fraction, "in (0, 1]");
  }
  if (!(o.round_deadline_s > 0) || !std::isfinite(o.round_deadline_s)) {
    return OutOfRange("round_deadline_s", o.round_deadline_s, "> 0");
  }
  if (o.batch_size < 1) return OutOfRange("training.batch_size", o.batch_size, ">= 1");
  if (o.local_steps < 0) return OutOfRange("training.local_steps", o.local_steps, ">= 0");
  if (o.local_epochs < 1) return OutOfRange("training.local_epochs", o.local_epochs, ">= 1");
  if (!in(o.min_online_probability, 0, 1)) {
    return OutOfRange("min_online_probability", o.min_online_probability, "in [0, 1]");
  }
  return absl::OkStatus();
}

template <typename T>
T OrDefault(T value, T fallback) {
  return value != T{} ? value : fallback;
}

}  // namespace

// Why a participant was taken, for SelectionReason.note.
enum Note : uint8_t {
  kNoteNone,
  kNoteRandom,
  kNoteOortInitial,
  kNoteOortExploit,
  kNoteOortExplore,
  kNoteOortFillExploit,
  kNoteOortFillExplore,
  kNoteFedCaseTop,
  kNoteFedCaseRandom,
  kNoteFedCaseLate,
};
constexpr const char* kNoteText[] = {"",
                                     "random",
                                     "oort-initial-random",
                                     "oort-exploit",
                                     "oort-explore",
                                     "oort-fill-exploit",
                                     "oort-fill-explore",
                                     "fedcase-top-experience",
                                     "fedcase-random",
                                     "fedcase-completion-fill"};

// Kept small (48 bytes): the planner scans one per candidate several times a round. Reason
// details of the few participants are recomputed after selection.
struct Planner::Candidate {
  ClientIndex index = 0;
  int32_t steps = 0;      // after workload sizing
  double t_s = 0;         // predicted seconds at `steps`
  double utility = 0;     // raw statistical utility (reported, or at registration)
  double score = 0;       // Oort's score / exploration weight (the base set's rank)
  double experience = 0;  // FedCaSe experience (fedcase only)
  uint8_t status = kAvailable;
  uint8_t note = kNoteNone;
  bool tried = false;  // selected before: Oort's "explored" pool
  bool fits = true;    // predicted to finish by the deadline at the fewest steps (FedCaSe)
  bool exploited = false;
  bool explore_pick = false;
};

OortOptions OortOptions::FromConfig(const v1::OortConfig& c) {
  OortOptions o;
  o.exploration_factor = OrDefault(c.exploration_factor(), o.exploration_factor);
  o.exploration_decay = OrDefault(c.exploration_decay(), o.exploration_decay);
  o.exploration_min = OrDefault(c.exploration_min(), o.exploration_min);
  o.round_threshold = OrDefault(c.round_threshold(), o.round_threshold);
  o.round_penalty = OrDefault(c.round_penalty(), o.round_penalty);
  o.clip_bound = OrDefault(c.clip_bound(), o.clip_bound);
  o.cut_off_util = OrDefault(c.cut_off_util(), o.cut_off_util);
  o.pacer_step = OrDefault(c.pacer_step(), o.pacer_step);
  o.pacer_delta = OrDefault(c.pacer_delta(), o.pacer_delta);
  o.sample_window = OrDefault(c.sample_window(), o.sample_window);
  return o;
}

FedCaseOptions FedCaseOptions::FromConfig(const v1::FedCaseConfig& c) {
  FedCaseOptions o;
  o.top_ratio = OrDefault(c.top_ratio(), o.top_ratio);
  o.speed_weight = OrDefault(c.speed_weight(), o.speed_weight);
  if (c.base_policy() != v1::FedCaseConfig::BASE_POLICY_UNSPECIFIED) {
    o.base_policy = c.base_policy();
  }
  return o;
}

CachePlanOptions CachePlanOptions::FromConfig(const v1::CacheConfig& c) {
  CachePlanOptions o;
  if (c.policy() != v1::CACHE_POLICY_UNSPECIFIED) o.policy = c.policy();
  o.capacity_fraction = OrDefault(c.capacity_fraction(), o.capacity_fraction);
  o.replication_factor = OrDefault(c.replication_factor(), o.replication_factor);
  o.prefetch = !c.disable_prefetch();
  return o;
}

absl::StatusOr<PlannerOptions> PlannerOptions::FromServerConfig(const v1::ServerConfig& config) {
  const v1::SelectionConfig& sel = config.selection();
  const v1::TrainingConfig& tr = config.training();
  PlannerOptions o;
  if (sel.policy() != v1::SELECTION_POLICY_UNSPECIFIED) o.policy = sel.policy();
  if (config.clients_per_round() < 0) {
    return OutOfRange("clients_per_round", config.clients_per_round(), ">= 0 (0 = 10)");
  }
  o.clients_per_round = OrDefault(config.clients_per_round(), o.clients_per_round);
  o.overcommit = OrDefault(sel.overcommit(), o.overcommit);
  o.oort = OortOptions::FromConfig(sel.oort());
  o.fedcase = FedCaseOptions::FromConfig(sel.fedcase());
  o.cache = CachePlanOptions::FromConfig(config.cache());
  o.workload_sizing = sel.workload_sizing();
  o.min_local_steps = OrDefault(sel.min_local_steps(), o.min_local_steps);
  if (config.round_closing() != v1::ROUND_CLOSING_UNSPECIFIED) {
    o.round_closing = config.round_closing();
  }
  o.round_deadline_s = OrDefault(config.round_deadline_s(), o.round_deadline_s);
  o.batch_size = OrDefault(tr.batch_size(), o.batch_size);
  o.local_steps = tr.local_steps();
  o.local_epochs = OrDefault(tr.local_epochs(), o.local_epochs);
  o.seed = OrDefault<uint64_t>(config.seed(), o.seed);
  FEDSCHED_RETURN_IF_ERROR(Validate(o));
  return o;
}

ClosingForecast ForecastClosing(absl::Span<const PlannedTask> participants, int32_t k,
                                v1::RoundClosing closing, double round_deadline_s) {
  ClosingForecast f;
  f.deadline_s = round_deadline_s;
  const size_t n = participants.size();
  const size_t kk = static_cast<size_t>(std::clamp<int64_t>(k, 0, static_cast<int64_t>(n)));
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return participants[a].predicted_seconds < participants[b].predicted_seconds;
  });
  f.first.assign(order.begin(), order.begin() + kk);
  if (closing == v1::ROUND_CLOSING_DEADLINE || kk == 0) {
    f.expected_close_s = round_deadline_s;
  } else {
    f.expected_close_s = std::min(participants[order[kk - 1]].predicted_seconds, round_deadline_s);
  }
  return f;
}

absl::StatusOr<std::unique_ptr<Planner>> Planner::Create(const PlannerOptions& options,
                                                         profile::ProfileBook* book) {
  if (book == nullptr) return absl::InvalidArgumentError("Planner needs a ProfileBook");
  FEDSCHED_RETURN_IF_ERROR(Validate(options));
  FEDSCHED_ASSIGN_OR_RETURN(RoundTimePredictor predictor,
                            RoundTimePredictor::Create(options.predictor));
  return std::unique_ptr<Planner>(new Planner(options, book, std::move(predictor)));
}

Planner::Planner(const PlannerOptions& options, profile::ProfileBook* book,
                 RoundTimePredictor predictor)
    : options_(options),
      book_(book),
      predictor_(std::move(predictor)),
      default_slots_(std::max(1, CeilToInt(options.clients_per_round * options.overcommit))),
      epsilon_(options.oort.exploration_factor),
      round_threshold_(options.oort.round_threshold) {}

Planner::~Planner() = default;

int32_t Planner::StepsFor(int64_t num_samples) const {
  if (options_.local_steps > 0) return options_.local_steps;
  const int64_t per_epoch =
      (std::max<int64_t>(num_samples, 1) + options_.batch_size - 1) / options_.batch_size;
  return static_cast<int32_t>(std::clamp<int64_t>(per_epoch * options_.local_epochs, 1, 1 << 30));
}

void Planner::Evaluate(ClientIndex index, const PlanRequest& request, Candidate* c) const {
  const ClientState& s = book_->state(index);
  c->index = index;
  const int32_t full_steps = StepsFor(s.num_samples);
  c->tried = s.last_selected_round > 0;
  const double batch = options_.batch_size;
  const LinearPrediction lp =
      predictor_.PredictLinear(book_->Inputs(index, request.model_bytes, 0));
  const double full = full_steps;
  // A straggler bound, scaled with the workload: the task it comes from had ~full_steps.
  auto predict = [&](int32_t steps) {
    double t = std::max(lp.fixed_s + lp.per_sample_s * batch * steps,
                        RoundTimePredictor::kMinPredictionSeconds);
    if (s.censored_duration_s > 0) t = std::max(t, s.censored_duration_s * steps / full);
    return t;
  };
  c->steps = full_steps;
  c->t_s = predict(full_steps);
  const double deadline = options_.round_deadline_s;
  if (options_.workload_sizing) {
    const int32_t min_steps = std::min(options_.min_local_steps, full_steps);
    const double target = options_.workload_fit_fraction * deadline;
    if (c->t_s > target) {
      double fit = full;
      const double per_step = lp.per_sample_s * batch;
      if (per_step > 0) fit = std::floor((target - lp.fixed_s) / per_step);
      if (s.censored_duration_s > 0) {
        fit = std::min(fit, std::floor(target * full / s.censored_duration_s));
      }
      c->steps = static_cast<int32_t>(std::clamp(fit, static_cast<double>(min_steps), full));
      if (c->steps < full_steps) c->t_s = predict(c->steps);
    }
    c->fits = (c->steps > min_steps ? predict(min_steps) : c->t_s) <= deadline;
  } else {
    c->fits = c->t_s <= deadline;
  }
  if (s.has_utility) {
    c->utility = s.statistical_utility;
  } else {
    // Oort's registration utility: min(|D_i|, batch x local steps) (research.md section 3).
    const double slots = batch * full_steps;
    c->utility = s.num_samples > 0 ? std::min<double>(s.num_samples, slots) : slots;
  }
}

bool Planner::Feasible(const Candidate& c, const PlanRequest& request) const {
  if (request.availability == nullptr) return true;
  const double p =
      request.availability->ProbabilityOnline(c.index, request.now_s, request.now_s + c.t_s);
  return p >= options_.min_online_probability;  // false for NaN
}

template <typename Ok>
size_t Planner::TakeTop(size_t need, Ok&& ok) {
  size_t taken = 0;
  size_t lo = 0;
  size_t hi = stage_.size();
  auto by_key = [](const Keyed& a, const Keyed& b) { return a.key > b.key; };
  while (taken < need && lo < hi) {
    const size_t want = std::min(need - taken, hi - lo);
    auto first = stage_.begin() + lo;
    if (want < hi - lo) std::nth_element(first, first + want, stage_.begin() + hi, by_key);
    auto block_end = first + want;
    // `ok` takes a feasible entry (and marks a rejected one); each is asked exactly once.
    auto mid = std::partition(first, block_end, [&](const Keyed& k) { return ok(k.pos); });
    const size_t accepted = static_cast<size_t>(mid - first);
    const size_t rejected = want - accepted;
    std::rotate(mid, block_end, stage_.begin() + hi);
    hi -= rejected;
    lo += accepted;
    taken += accepted;
  }
  return taken;
}

template <typename Ok>
size_t Planner::TakeRandom(size_t need, std::mt19937_64& rng, Ok&& ok) {
  size_t taken = 0;
  size_t lo = 0;
  size_t hi = stage_.size();
  while (taken < need && lo < hi) {
    std::swap(stage_[lo], stage_[lo + UniformIndex(rng, hi - lo)]);
    if (ok(stage_[lo].pos)) {
      ++lo;
      ++taken;
    } else {
      std::swap(stage_[lo], stage_[--hi]);
    }
  }
  return taken;
}

// Successive sampling without replacement, p ~ key (floored at kMinWeight), among the stage's
// pool_ positions: each draw is over the whole stage by prefix sums and binary search, and a
// draw that hits an entry already taken or rejected is redrawn, which gives exactly the
// conditional distribution over the remaining entries. After a run of such misses the stage
// is compacted. O(stage) to build plus O(log stage) per draw; no per-entry logarithms.
template <typename Ok>
size_t Planner::TakeWeighted(size_t need, std::mt19937_64& rng, Ok&& ok) {
  constexpr int kMaxMisses = 16;
  size_t taken = 0;
  size_t remaining = 0;
  double total = 0;
  auto rebuild = [&] {
    size_t n = 0;
    for (const Keyed& k : stage_) {
      if (pool_[k.pos].status == kAvailable) stage_[n++] = k;
    }
    stage_.resize(n);
    values_.resize(n);
    total = 0;
    for (size_t i = 0; i < n; ++i) {
      total += std::max(stage_[i].key, kMinWeight);
      values_[i] = total;
    }
    remaining = n;
  };
  rebuild();
  int misses = 0;
  while (taken < need && remaining > 0) {
    if (misses >= kMaxMisses) {
      rebuild();
      misses = 0;
      continue;
    }
    const double r = Uniform01(rng) * total;
    size_t i =
        static_cast<size_t>(std::upper_bound(values_.begin(), values_.end(), r) - values_.begin());
    if (i >= stage_.size()) i = stage_.size() - 1;
    const uint32_t pos = stage_[i].pos;
    if (pool_[pos].status != kAvailable) {
      ++misses;
      continue;
    }
    misses = 0;
    --remaining;
    if (ok(pos)) ++taken;
  }
  return taken;
}

template <typename Pred, typename Key>
void Planner::FillStage(Pred&& pred, Key&& key) {
  stage_.clear();
  for (uint32_t pos = 0; pos < pool_.size(); ++pos) {
    const Candidate& c = pool_[pos];
    if (c.status == kAvailable && pred(c)) stage_.push_back({key(c), pos});
  }
}

void Planner::AppendExpectedNext(size_t count, RoundPlan* plan) {
  // stage_ holds {rank key, position}; the `count` best, best first (ties by position).
  const size_t n = std::min(stage_.size(), count);
  auto better = [](const Keyed& a, const Keyed& b) {
    return a.key > b.key || (a.key == b.key && a.pos < b.pos);
  };
  if (n < stage_.size()) std::nth_element(stage_.begin(), stage_.begin() + n, stage_.end(), better);
  std::sort(stage_.begin(), stage_.begin() + n, better);
  for (size_t i = 0; i < n; ++i) {
    const Candidate& c = pool_[stage_[i].pos];
    plan->expected_next.push_back(
        {c.index, book_->profile(c.index).client_id(),
         MakeCachePlan(c.index, StepsFor(book_->state(c.index).num_samples), true)});
  }
}

void Planner::SelectRandom(const PlanRequest& request, size_t slots, std::mt19937_64& rng) {
  for (ClientIndex idx : request.candidates) {
    if (book_->state(idx).busy || stamp_[idx] == stamp_serial_) continue;
    stamp_[idx] = stamp_serial_;
    stage_.push_back({0.0, idx});
  }
  // Only the drawn candidates are evaluated, so a round costs O(candidates) copying plus
  // O(slots) predictions.
  TakeRandom(slots, rng, [&](uint32_t idx) {
    Candidate c;
    Evaluate(idx, request, &c);
    if (!Feasible(c, request)) return false;
    c.note = kNoteRandom;
    c.status = kSelected;
    pool_.push_back(c);
    chosen_.push_back(static_cast<uint32_t>(pool_.size() - 1));
    return true;
  });
}

void Planner::PoolCandidates(const PlanRequest& request) {
  for (ClientIndex idx : request.candidates) {
    if (book_->state(idx).busy || stamp_[idx] == stamp_serial_) continue;
    stamp_[idx] = stamp_serial_;
    Evaluate(idx, request, &pool_.emplace_back());
  }
}

void Planner::SelectOort(const PlanRequest& request, size_t slots, std::mt19937_64& rng,
                         RoundPlan* plan) {
  PoolCandidates(request);
  if (pool_.empty()) return;
  const bool scored = FillOort(request, slots, /*fits_only=*/false, rng, plan);
  if (options_.cache.prefetch && scored) {
    // Expected next round: the best-scoring tried clients not picked now.
    FillStage([](const Candidate& c) { return c.tried; },
              [](const Candidate& c) { return c.score; });
    AppendExpectedNext(slots, plan);
  }
}

bool Planner::FillOort(const PlanRequest& request, size_t slots, bool fits_only,
                       std::mt19937_64& rng, RoundPlan* plan) {
  // Takes pool_[pos] when feasible; marks it rejected otherwise.
  auto taker = [this, &request](uint8_t note, bool exploited) {
    return [this, &request, note, exploited](uint32_t pos) {
      Candidate& c = pool_[pos];
      if (!Feasible(c, request)) {
        c.status = kRejected;
        return false;
      }
      c.status = kSelected;
      c.note = note;
      c.exploited = exploited;
      c.explore_pick = !exploited;
      chosen_.push_back(pos);
      return true;
    };
  };
  auto eligible = [fits_only](const Candidate& c) { return !fits_only || c.fits; };
  auto is_tried = [eligible](const Candidate& c) { return c.tried && eligible(c); };
  auto is_new = [eligible](const Candidate& c) { return !c.tried && eligible(c); };
  auto score = [](const Candidate& c) { return c.score; };
  if (chosen_.size() >= slots) return false;
  // Oort's share of the round: everything when it selects alone, the slots left by FedCaSe's
  // top clients when it is FedCaSe's base set.
  const size_t oort_slots = slots - chosen_.size();

  const bool first_round = rounds_planned_ == 0 || (plan->attempt > 1 && rounds_planned_ == 1);
  if (first_round) {
    // Oort's first round is uniform (research.md section 3): nothing is known yet.
    FillStage(eligible, [](const Candidate&) { return 0.0; });
    TakeRandom(oort_slots, rng, taker(kNoteOortInitial, false));
    return false;
  }

  // T: the round_threshold-th percentile of the tried clients' predicted durations (of all
  // candidates while none was tried); the utility clip and floor over the tried clients. These
  // are statistics of the whole candidate population, FedCaSe's top clients included.
  values_.clear();
  for (const Candidate& c : pool_) {
    if (c.tried) values_.push_back(c.t_s);
  }
  const size_t tried = values_.size();
  if (tried == 0) {
    for (const Candidate& c : pool_) values_.push_back(c.t_s);
  }
  OortRoundTerms& terms = oort_terms_;
  terms = OortRoundTerms();
  terms.round = request.round;
  terms.round_penalty = options_.oort.round_penalty;
  terms.preferred_duration_s = PercentileInPlace(absl::MakeSpan(values_), round_threshold_);
  values_.clear();
  double min_utility = std::numeric_limits<double>::infinity();
  for (const Candidate& c : pool_) {
    if (!c.tried) continue;
    values_.push_back(c.utility);
    min_utility = std::min(min_utility, c.utility);
  }
  terms.clip_utility = PercentileInPlace(absl::MakeSpan(values_), 100.0 * options_.oort.clip_bound);
  terms.min_utility = tried > 0 ? min_utility : 0.0;
  preferred_duration_s_ = terms.preferred_duration_s;
  plan->preferred_duration_s = terms.preferred_duration_s;

  size_t tried_left = 0;  // tried clients Oort may still exploit
  for (Candidate& c : pool_) {
    if (c.tried) {
      if (c.status == kAvailable && eligible(c)) ++tried_left;
      c.score = OortScore(c.utility, c.t_s, book_->state(c.index).last_selected_round, terms).score;
    } else {
      // Exploration weight: registration utility x speed penalty.
      c.score =
          c.utility * OortSpeedPenalty(c.t_s, terms.preferred_duration_s, terms.round_penalty);
    }
  }

  const size_t exploit_len =
      std::min(tried_left, static_cast<size_t>(std::floor((1.0 - epsilon_) * oort_slots)));
  const size_t explore_len = oort_slots - exploit_len;
  // Exploit: p ~ score among the tried clients scoring >= cut_off x the exploit_len-th best.
  if (exploit_len > 0) {
    FillStage(is_tried, score);
    std::nth_element(stage_.begin(), stage_.begin() + (exploit_len - 1), stage_.end(),
                     [](const Keyed& a, const Keyed& b) { return a.key > b.key; });
    const double cut = options_.oort.cut_off_util * stage_[exploit_len - 1].key;
    size_t n = 0;
    for (const Keyed& k : stage_) {
      if (k.key >= cut) stage_[n++] = k;
    }
    stage_.resize(n);
    TakeWeighted(exploit_len, rng, taker(kNoteOortExploit, true));
  }
  // Explore: p ~ weight among the sample_window x explore_len never-tried with the largest one.
  if (explore_len > 0) {
    FillStage(is_new, score);
    const size_t window =
        std::min(stage_.size(), static_cast<size_t>(options_.oort.sample_window) * explore_len);
    if (window < stage_.size()) {
      std::nth_element(stage_.begin(), stage_.begin() + window, stage_.end(),
                       [](const Keyed& a, const Keyed& b) { return a.key > b.key; });
      stage_.resize(window);
    }
    TakeWeighted(explore_len, rng, taker(kNoteOortExplore, false));
  }
  // Shortfalls (a pool too small, or candidates predicted offline): the rest of the tried
  // clients, then the rest of the never-tried ones, both p ~ score.
  if (chosen_.size() < slots) {
    FillStage(is_tried, score);
    TakeWeighted(slots - chosen_.size(), rng, taker(kNoteOortFillExploit, true));
  }
  if (chosen_.size() < slots) {
    FillStage(is_new, score);
    TakeWeighted(slots - chosen_.size(), rng, taker(kNoteOortFillExplore, false));
  }
  return true;
}

void Planner::SelectFedCase(const PlanRequest& request, size_t slots, std::mt19937_64& rng,
                            RoundPlan* plan) {
  PoolCandidates(request);
  if (pool_.empty()) return;
  // Running extremes over all history, this round's candidates included.
  for (const Candidate& c : pool_) {
    if (!has_range_) {
      range_ = {c.t_s, c.t_s, c.utility, c.utility};
      has_range_ = true;
    }
    range_.min_duration_s = std::min(range_.min_duration_s, c.t_s);
    range_.max_duration_s = std::max(range_.max_duration_s, c.t_s);
    range_.min_utility = std::min(range_.min_utility, c.utility);
    range_.max_utility = std::max(range_.max_utility, c.utility);
  }
  for (Candidate& c : pool_) {
    c.experience = FedCaseExperience(c.t_s, c.utility, range_, options_.fedcase.speed_weight);
    c.score = c.experience;  // the random base set keeps it; Oort's overwrites it
  }
  auto taker = [this, &request](uint8_t note) {
    return [this, &request, note](uint32_t pos) {
      Candidate& c = pool_[pos];
      if (!Feasible(c, request)) {
        c.status = kRejected;
        return false;
      }
      c.status = kSelected;
      c.note = note;
      chosen_.push_back(pos);
      return true;
    };
  };
  auto fits = [](const Candidate& c) { return c.fits; };
  auto experience = [](const Candidate& c) { return c.experience; };
  const size_t top =
      std::min(slots, static_cast<size_t>(std::max(
                          0, CeilToInt(options_.fedcase.top_ratio * options_.clients_per_round))));

  FillStage(fits, experience);
  TakeTop(top, taker(kNoteFedCaseTop));
  if (chosen_.size() < slots) {
    if (options_.fedcase.base_policy == v1::FedCaseConfig::BASE_POLICY_RANDOM) {
      FillStage(fits, [](const Candidate&) { return 0.0; });
      TakeRandom(slots - chosen_.size(), rng, taker(kNoteFedCaseRandom));
    } else {
      FillOort(request, slots, /*fits_only=*/true, rng, plan);
    }
  }
  if (chosen_.size() < slots) {
    FillStage([](const Candidate& c) { return !c.fits; },
              [](const Candidate& c) { return -c.t_s; });
    TakeTop(slots - chosen_.size(), taker(kNoteFedCaseLate));
  }
  if (options_.cache.prefetch && top > 0) {
    // Expected next round: the best by experience among those not picked now.
    FillStage(fits, experience);
    AppendExpectedNext(top, plan);
  }
}

v1::CachePlan Planner::MakeCachePlan(ClientIndex index, int32_t local_steps, bool prefetch) const {
  const ClientState& s = book_->state(index);
  v1::CachePlan plan;
  plan.set_policy(options_.cache.policy);
  plan.set_samples_to_train(static_cast<int64_t>(options_.batch_size) * local_steps);
  plan.set_prefetch(prefetch);
  if (options_.cache.policy == v1::CACHE_POLICY_NONE) {
    plan.set_replication_factor(1);
    return plan;
  }
  plan.set_replication_factor(options_.cache.replication_factor);
  // capacity = wss x |D_i| samples (research.md section 4), at least one sample, and within
  // the device's storage budget. 0 would mean "no bound" to the SDK.
  int64_t samples = 0;
  if (s.num_samples > 0) {
    samples = std::max<int64_t>(
        1, static_cast<int64_t>(
               std::ceil(options_.cache.capacity_fraction * s.num_samples - kCeilSlack)));
  }
  int64_t bytes = 0;
  if (s.sample_bytes > 0 && samples > 0) {
    bytes = samples * s.sample_bytes;
    if (s.storage_budget_bytes > 0 && bytes > s.storage_budget_bytes) {
      samples = std::max<int64_t>(1, s.storage_budget_bytes / s.sample_bytes);
      bytes = std::min(samples * s.sample_bytes, s.storage_budget_bytes);
    }
  } else if (s.storage_budget_bytes > 0) {
    bytes = s.storage_budget_bytes;
  }
  plan.set_capacity_samples(samples);
  plan.set_capacity_bytes(bytes);
  return plan;
}

absl::StatusOr<RoundPlan> Planner::PlanRound(const PlanRequest& request) {
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

  RoundPlan plan;
  plan.round = request.round;
  plan.attempt = request.round == last_planned_round_ ? plan_attempts_ + 1 : 1;
  plan.planned_at_s = request.now_s;
  plan.deadline_s = options_.round_deadline_s;
  const size_t slots = request.max_participants > 0 ? static_cast<size_t>(request.max_participants)
                                                    : static_cast<size_t>(default_slots_);

  // Randomness depends only on (seed, round, attempt): a restarted planner draws the same.
  std::seed_seq seq{static_cast<uint32_t>(options_.seed),
                    static_cast<uint32_t>(options_.seed >> 32),
                    static_cast<uint32_t>(request.round),
                    static_cast<uint32_t>(static_cast<uint64_t>(request.round) >> 32),
                    static_cast<uint32_t>(plan.attempt)};
  std::mt19937_64 rng(seq);

  pool_.clear();
  stage_.clear();
  chosen_.clear();
  if (stamp_.size() < static_cast<size_t>(book_size)) stamp_.resize(book_size, 0);
  if (++stamp_serial_ == 0) {
    std::fill(stamp_.begin(), stamp_.end(), 0);
    stamp_serial_ = 1;
  }
  switch (options_.policy) {
    case v1::SELECTION_POLICY_OORT:
      SelectOort(request, slots, rng, &plan);
      break;
    case v1::SELECTION_POLICY_FEDCASE:
      SelectFedCase(request, slots, rng, &plan);
      break;
    default:
      SelectRandom(request, slots, rng);
      break;
  }

  plan.participants.reserve(chosen_.size());
  const v1::SelectionPolicy policy = options_.policy == v1::SELECTION_POLICY_UNSPECIFIED
                                         ? v1::SELECTION_POLICY_RANDOM
                                         : options_.policy;
  // Oort's terms exist when it scored this round, alone or as FedCaSe's base set.
  const bool oort_scored =
      (policy == v1::SELECTION_POLICY_OORT ||
       (policy == v1::SELECTION_POLICY_FEDCASE &&
        options_.fedcase.base_policy == v1::FedCaseConfig::BASE_POLICY_OORT)) &&
      plan.preferred_duration_s > 0;
  for (uint32_t pos : chosen_) {
    const Candidate& c = pool_[pos];
    const ClientState& s = book_->state(c.index);
    PlannedTask& t = plan.participants.emplace_back();
    t.index = c.index;
    t.client_id = book_->profile(c.index).client_id();
    t.local_steps = c.steps;
    t.predicted_seconds = c.t_s;
    v1::SelectionReason& r = t.reason;
    r.set_client_id(t.client_id);
    r.set_policy(policy);
    r.set_speed_penalty(1.0);
    if (oort_scored) {
      // Utility and penalty terms for the record (for a never-tried client: its registration
      // utility, normalised the same way).
      const OortScoreTerms st =
          OortScore(c.utility, c.t_s, std::max<int64_t>(1, s.last_selected_round), oort_terms_);
      r.set_statistical_utility(st.utility);
      r.set_speed_penalty(st.speed_penalty);
    }
    if (policy == v1::SELECTION_POLICY_FEDCASE) {
      // The rank the client was picked by: experience for the top clients, else the base
      // set's (Oort's score or exploration weight; experience under the random base).
      r.set_experience(c.experience);
      r.set_score(c.note == kNoteFedCaseTop ? c.experience : c.score);
    } else if (policy != v1::SELECTION_POLICY_RANDOM) {
      r.set_score(c.score);
    }
    r.set_explored(c.explore_pick);
    r.set_predicted_seconds(c.t_s);
    r.set_local_steps(c.steps);
    r.set_workload_reduced(c.steps < StepsFor(s.num_samples));
    r.set_note(kNoteText[c.note]);
    t.cache_plan = MakeCachePlan(c.index, c.steps, false);
  }
  std::stable_sort(plan.participants.begin(), plan.participants.end(),
                   [](const PlannedTask& a, const PlannedTask& b) {
                     return a.predicted_seconds < b.predicted_seconds;
                   });
  plan.target_updates =
      static_cast<int32_t>(std::min<size_t>(options_.clients_per_round, plan.participants.size()));
  const ClosingForecast forecast = ForecastClosing(
      plan.participants, plan.target_updates, options_.round_closing, options_.round_deadline_s);
  plan.expected_close_s = forecast.expected_close_s;

  // Commit: from here on the plan is handed out.
  const int64_t samples_per_step = options_.batch_size;
  for (uint32_t pos : chosen_) {
    const Candidate& c = pool_[pos];
    // Cannot fail: the index was validated above and the round is >= 1.
    (void)book_->OnTaskAssigned(c.index, request.round, request.now_s);
    InFlight& f = in_flight_[c.index];
    f.round = request.round;
    f.planned_at_s = request.now_s;
    f.predicted_s = c.t_s;
    f.inputs = book_->Inputs(c.index, request.model_bytes, samples_per_step * c.steps);
    f.exploited = c.exploited;
  }
  if (plan.attempt == 1) ++rounds_planned_;
  last_planned_round_ = request.round;
  plan_attempts_ = plan.attempt;
  return plan;
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
    predictor_.RecordError(it->second.predicted_s, t.completion_s);
    predictor_.Observe(it->second.inputs, t.completion_s);
    if (it->second.exploited) round_exploit_utility_ += metrics.statistical_utility();
    in_flight_.erase(it);
  }
  if (!has_range_) {
    range_ = {t.completion_s, t.completion_s, metrics.statistical_utility(),
              metrics.statistical_utility()};
    has_range_ = true;
  }
  range_.min_duration_s = std::min(range_.min_duration_s, t.completion_s);
  range_.max_duration_s = std::max(range_.max_duration_s, t.completion_s);
  range_.min_utility = std::min(range_.min_utility, metrics.statistical_utility());
  range_.max_utility = std::max(range_.max_utility, metrics.statistical_utility());
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

RoundSummary Planner::OnRoundFinished(int64_t round, bool committed, double now_s) {
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
    (void)book_->OnTaskFailed(index, profile::TaskFailure::kStraggler, elapsed, now_s);
  }
  summary.stragglers = static_cast<int32_t>(stragglers.size());
  const RoundTimePredictor::RoundError error = predictor_.FinishRound();
  summary.predictor_mape = error.mape;
  summary.predictions_scored = error.count;
  summary.exploit_utility = round_exploit_utility_;
  if (committed) {
    const size_t window = static_cast<size_t>(options_.oort.pacer_step);
    exploit_history_.push_back(round_exploit_utility_);
    if (exploit_history_.size() > 2 * window) {
      exploit_history_.erase(exploit_history_.begin(),
                             exploit_history_.end() - static_cast<ptrdiff_t>(2 * window));
    }
    ++rounds_committed_;
    if (rounds_committed_ % options_.oort.pacer_step == 0 &&
        exploit_history_.size() == 2 * window) {
      const double previous =
          std::accumulate(exploit_history_.begin(), exploit_history_.begin() + window, 0.0);
      const double last =
          std::accumulate(exploit_history_.begin() + window, exploit_history_.end(), 0.0);
      round_threshold_ = OortPacerStep(previous, last, round_threshold_, options_.oort.pacer_delta);
    }
    epsilon_ = std::max(epsilon_ * options_.oort.exploration_decay, options_.oort.exploration_min);
  }
  round_exploit_utility_ = 0;
  summary.epsilon = epsilon_;
  summary.round_threshold_percent = round_threshold_;
  return summary;
}

v1::PlannerState Planner::ExportState() const {
  v1::PlannerState s;
  s.set_version(kStateVersion);
  s.set_policy(options_.policy);
  s.set_last_planned_round(last_planned_round_);
  s.set_plan_attempts(plan_attempts_);
  s.set_rounds_planned(rounds_planned_);
  v1::OortState* o = s.mutable_oort();
  o->set_epsilon(epsilon_);
  o->set_round_threshold_percent(round_threshold_);
  for (double u : exploit_history_) o->add_exploit_utility_history(u);
  o->set_rounds_committed(rounds_committed_);
  o->set_preferred_duration_s(preferred_duration_s_);
  v1::FedCaseState* f = s.mutable_fedcase();
  f->set_has_range(has_range_);
  f->set_min_duration_s(range_.min_duration_s);
  f->set_max_duration_s(range_.max_duration_s);
  f->set_min_utility(range_.min_utility);
  f->set_max_utility(range_.max_utility);
  *s.mutable_predictor() = predictor_.ExportState();
  return s;
}

absl::Status Planner::ImportState(const v1::PlannerState& s) {
  if (s.version() != kStateVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("planner state version ", s.version(), " is not ", kStateVersion));
  }
  const v1::OortState& o = s.oort();
  if (!(o.epsilon() >= 0 && o.epsilon() <= 1) ||
      !(o.round_threshold_percent() > 0 && o.round_threshold_percent() <= 100) ||
      s.last_planned_round() < 0 || s.plan_attempts() < 0 || s.rounds_planned() < 0 ||
      o.rounds_committed() < 0) {
    return absl::InvalidArgumentError("planner state has an out-of-range value");
  }
  for (double u : o.exploit_utility_history()) {
    if (!std::isfinite(u)) return absl::InvalidArgumentError("non-finite exploit utility");
  }
  FEDSCHED_ASSIGN_OR_RETURN(RoundTimePredictor predictor,
                            RoundTimePredictor::Create(options_.predictor));
  FEDSCHED_RETURN_IF_ERROR(predictor.ImportState(s.predictor()));

  predictor_ = std::move(predictor);
  last_planned_round_ = s.last_planned_round();
  plan_attempts_ = s.plan_attempts();
  rounds_planned_ = s.rounds_planned();
  epsilon_ = o.epsilon();
  round_threshold_ = o.round_threshold_percent();
  exploit_history_.assign(o.exploit_utility_history().begin(), o.exploit_utility_history().end());
  const size_t keep = 2 * static_cast<size_t>(options_.oort.pacer_step);
  if (exploit_history_.size() > keep) {
    exploit_history_.erase(exploit_history_.begin(),
                           exploit_history_.end() - static_cast<ptrdiff_t>(keep));
  }
  rounds_committed_ = o.rounds_committed();
  preferred_duration_s_ = o.preferred_duration_s();
  has_range_ = s.fedcase().has_range();
  range_ = {s.fedcase().min_duration_s(), s.fedcase().max_duration_s(), s.fedcase().min_utility(),
            s.fedcase().max_utility()};
  in_flight_.clear();
  round_exploit_utility_ = 0;
  return absl::OkStatus();
}

}  // namespace fedsched::planner
