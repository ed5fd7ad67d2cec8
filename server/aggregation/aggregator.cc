#include "server/aggregation/aggregator.h"

#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/aggregation/aggregation_rule_registry.h"
#include "server/aggregation/checks.h"
#include "server/aggregation/kernels.h"
#include "unsupported/Eigen/CXX11/ThreadPool"

namespace fedsched {
namespace {

using ConstArr = Eigen::Map<const Eigen::ArrayXf>;
namespace ai = aggregation_internal;

// Models at least this large (bytes) are folded with non-temporal stores: the two running-sum
// buffers plus the update no longer fit in a typical last-level cache.
constexpr int64_t kStreamingMinBytes = int64_t{8} << 20;

// Slices of the coordinate range are at least this many values (2 MB), so that the work handed
// to a thread dwarfs the cost of waking it (tens of microseconds); aligned to 16 values (64 B).
constexpr int64_t kMinSliceValues = int64_t{1} << 19;

}  // namespace

double AdamBiasCorrection(double beta1, double beta2, int64_t t) {
  const double td = static_cast<double>(t);
  return std::sqrt(1.0 - std::pow(beta2, td)) / (1.0 - std::pow(beta1, td));
}

double StalenessWeight(int64_t staleness) {
  return 1.0 / std::sqrt(1.0 + static_cast<double>(staleness));
}

Aggregator::Aggregator(const v1::AggregationConfig& config, ModelLayout layout,
                       std::unique_ptr<AggregationRule> rule)
    : config_(config),
      layout_(std::move(layout)),
      rule_(std::move(rule)),
      properties_(rule_->properties()),
      state_slots_(rule_->StateSlots()),
      streaming_(layout_.total_size() * static_cast<int64_t>(sizeof(float)) >= kStreamingMinBytes) {
  for (int i = 0; i < layout_.num_tensors(); ++i) {
    v1::Tensor* t = shapes_.add_tensors();
    t->set_name(layout_.name(i));
    t->mutable_shape()->Add(layout_.shape(i).begin(), layout_.shape(i).end());
  }
  const int64_t total = layout_.total_size();
  const int64_t slices =
      std::max<int64_t>(1, std::min<int64_t>(config_.fold_threads(), total / kMinSliceValues));
  // Equal slices, each boundary rounded down to a multiple of 16 values.
  for (int64_t s = 0; s < slices; ++s) slice_starts_.push_back((total * s / slices) & ~int64_t{15});
  slice_starts_.push_back(total);
  if (slices > 1) pool_ = std::make_unique<Eigen::ThreadPool>(static_cast<int>(slices - 1));
}

bool Aggregator::ForEachSlice(absl::FunctionRef<bool(int64_t begin, int64_t end)> fn) const {
  const int slices = fold_slices();
  if (slices == 1) return fn(slice_starts_[0], slice_starts_[1]);
  bool ok[kMaxFoldThreads];
  Eigen::Barrier done(static_cast<unsigned int>(slices - 1));
  for (int s = 1; s < slices; ++s) {
    pool_->Schedule([&, s] {
      ok[s] = fn(slice_starts_[s], slice_starts_[s + 1]);
      done.Notify();
    });
  }
  ok[0] = fn(slice_starts_[0], slice_starts_[1]);
  done.Wait();
  return std::all_of(ok, ok + slices, [](bool b) { return b; });
}

void Aggregator::ForTensorsIn(int64_t begin, int64_t end,
                              absl::FunctionRef<void(int i, int64_t lo, int64_t hi)> fn) const {
  for (int i = 0; i < layout_.num_tensors(); ++i) {
    const int64_t lo = std::max(begin, layout_.offset(i));
    const int64_t hi = std::min(end, layout_.offset(i) + layout_.size(i));
    if (lo < hi) fn(i, lo, hi);
  }
}

Aggregator::~Aggregator() = default;

absl::StatusOr<std::unique_ptr<Aggregator>> Aggregator::Create(const v1::AggregationConfig& config,
                                                               const v1::Model& global) {
  FEDSCHED_ASSIGN_OR_RETURN(v1::AggregationConfig effective, EffectiveAggregationConfig(config));
  FEDSCHED_RETURN_IF_ERROR(ValidateModel(global));
  FEDSCHED_ASSIGN_OR_RETURN(ModelLayout layout, ModelLayout::FromModel(global));
  FEDSCHED_ASSIGN_OR_RETURN(std::unique_ptr<AggregationRule> rule,
                            CreateAggregationRule(effective));
  std::unique_ptr<Aggregator> agg(new Aggregator(effective, std::move(layout), std::move(rule)));
  const size_t n = static_cast<size_t>(agg->layout_.total_size());
  for (int b = 0; b < 2; ++b) {
    agg->state_[b].assign(agg->state_slots_.size(), std::vector<float>(n, 0.0f));
  }
  return agg;
}

absl::Status Aggregator::Accumulate(const v1::Model& delta, int64_t num_examples) {
  return Accumulate(delta, num_examples, /*staleness=*/0);
}

namespace {

absl::Status NonFiniteError(const v1::Tensor& t) {
  const int64_t bad = FirstNonFinite(t.data().data(), t.data_size());
  return absl::InvalidArgumentError(absl::StrCat("tensor '", t.name(), "': non-finite value ",
                                                 bad >= 0 ? t.data(bad) : 0.0f, " at index ", bad));
}

}  // namespace

std::vector<double> Aggregator::TensorSumSquares(const v1::Model& delta) {
  std::vector<double> sums;
  sums.reserve(static_cast<size_t>(delta.tensors_size()));
  for (const v1::Tensor& t : delta.tensors()) {
    sums.push_back(ai::SumSquares(t.data().data(), t.data_size()));
  }
  return sums;
}

absl::Status Aggregator::PrepareCounts(int64_t num_examples, int64_t staleness,
                                       int64_t examples_so_far) const {
  if (num_examples <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("num_examples must be > 0, got ", num_examples));
  }
  if (num_examples > std::numeric_limits<int64_t>::max() - examples_so_far) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_examples ", num_examples, " overflows the round's example count ", examples_so_far));
  }
  if (staleness < 0) {
    return absl::InvalidArgumentError(absl::StrCat("staleness must be >= 0, got ", staleness));
  }
  if (staleness > config_.max_staleness()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "update is ", staleness, " versions stale; max_staleness is ", config_.max_staleness()));
  }
  if (!is_averaging() && static_cast<int64_t>(buffered_.size()) >= config_.max_buffered_updates()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "aggregation rule ", AggregationRuleDisplayName(config_),
        " already holds max_buffered_updates = ", config_.max_buffered_updates(), " updates"));
  }
  return absl::OkStatus();
}

absl::Status Aggregator::Prepare(const v1::Model& delta, int64_t num_examples, int64_t staleness,
                                 int64_t examples_so_far, absl::Span<const double> sum_squares,
                                 std::vector<int>* index, double* scale) const {
  FEDSCHED_RETURN_IF_ERROR(PrepareCounts(num_examples, staleness, examples_so_far));
  FEDSCHED_RETURN_IF_ERROR(layout_.Match(delta, index));

  // Clipping needs the update's L2 norm before the fold: one read-only pass, which also catches
  // non-finite values (their squares sum to Inf or NaN).
  *scale = StalenessWeight(staleness);
  if (config_.clip_update_norm() > 0.0) {
    // The caller's sums when it has them (the same kernel, so the same bits).
    const bool given = static_cast<int>(sum_squares.size()) == delta.tensors_size();
    double total = 0.0;
    for (int i = 0; i < delta.tensors_size(); ++i) {
      const v1::Tensor& t = delta.tensors(i);
      const double ss = given ? sum_squares[static_cast<size_t>(i)]
                              : ai::SumSquares(t.data().data(), t.data_size());
      if (!std::isfinite(ss)) return NonFiniteError(t);
      total += ss;
    }
    const double norm = std::sqrt(total);
    if (norm > config_.clip_update_norm()) *scale *= config_.clip_update_norm() / norm;
  }
  return absl::OkStatus();
}

void Aggregator::Commit(int64_t num_examples) {
  total_weight_ += static_cast<double>(num_examples);
  total_examples_ += num_examples;
  ++num_updates_;
}

absl::Status Aggregator::Accumulate(const v1::Model& delta, int64_t num_examples,
                                    int64_t staleness) {
  return AccumulateOne(delta, num_examples, staleness, {});
}

absl::Status Aggregator::AccumulateOne(const v1::Model& delta, int64_t num_examples,
                                       int64_t staleness, absl::Span<const double> sum_squares) {
  double scale = 1.0;
  FEDSCHED_RETURN_IF_ERROR(Prepare(delta, num_examples, staleness, total_examples_, sum_squares,
                                   &scratch_index_, &scale));

  if (!is_averaging()) {
    for (const v1::Tensor& t : delta.tensors()) {
      if (FirstNonFinite(t.data().data(), t.data_size()) >= 0) return NonFiniteError(t);
    }
    std::vector<float> copy(static_cast<size_t>(layout_.total_size()));
    const float s = static_cast<float>(scale);
    for (int k = 0; k < delta.tensors_size(); ++k) {
      const v1::Tensor& t = delta.tensors(k);
      ai::Scale(s, t.data().data(), t.data_size(), copy.data() + layout_.offset(scratch_index_[k]));
    }
    buffered_.push_back(std::move(copy));
    buffered_examples_.push_back(num_examples);
    Commit(num_examples);
    return absl::OkStatus();
  }

  const float w = static_cast<float>(static_cast<double>(num_examples) * scale);
  if (!FoldWeighted(delta, scratch_index_, w, FoldBound(w, sum_squares, delta.tensors_size()))) {
    return FoldError(delta, scratch_index_, w, num_examples);
  }
  Commit(num_examples);
  return absl::OkStatus();
}

bool Aggregator::FoldWeighted(const v1::Model& delta, const std::vector<int>& index, float w,
                              double bound) {
  // Fold in place when `bound` proves it cannot fail, else into the spare buffer (or straight
  // into the empty current one for the first update of a round), adopted only if every tensor
  // folded to finite values.
  const FoldTarget t = BeginFold(bound);
  const float* in = t.in;
  float* out = t.out;
  // The update's data by layout index.
  std::vector<const float*>& src = scratch_ptrs_;
  src.assign(static_cast<size_t>(layout_.num_tensors()), nullptr);
  for (int k = 0; k < delta.tensors_size(); ++k) {
    src[index[k]] = delta.tensors(k).data().data();
  }
  const bool ok = ForEachSlice([&](int64_t begin, int64_t end) {
    bool slice_ok = true;
    ForTensorsIn(begin, end, [&](int i, int64_t lo, int64_t hi) {
      slice_ok &=
          ai::FoldChecked(in == nullptr ? nullptr : in + lo, src[i] + (lo - layout_.offset(i)), w,
                          out + lo, hi - lo, streaming_);
    });
    return slice_ok;
  });
  EndFold(t, ok, bound);
  return ok;
}

absl::Status Aggregator::FoldError(const v1::Model& delta, const std::vector<int>& index, float w,
                                   int64_t num_examples) {
  // Tell a bad value from an overflow, tensor by tensor in the update's order.
  for (const v1::Tensor& t : delta.tensors()) {
    if (FirstNonFinite(t.data().data(), t.data_size()) >= 0) return NonFiniteError(t);
  }
  const bool first = sum_is_zero_;
  EnsureSumBuffer(/*spare=*/true);
  const float* in = sum_[current_].data();
  float* spare = sum_[1 - current_].data();
  for (int k = 0; k < delta.tensors_size(); ++k) {
    const v1::Tensor& t = delta.tensors(k);
    const int64_t offset = layout_.offset(index[k]);
    if (!ai::FoldChecked(first ? nullptr : in + offset, t.data().data(), w, spare + offset,
                         t.data_size(), /*streaming=*/false)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", t.name(), "': the weighted sum overflows float32 (num_examples ",
          num_examples, ", max |value| ", ai::MaxAbs(t.data().data(), t.data_size()), ")"));
    }
  }
  return absl::InternalError("fold failed, but no tensor is non-finite or overflows");
}

std::vector<absl::Status> Aggregator::AccumulateBatch(absl::Span<const WeightedUpdate> updates) {
  // Runs of float32 updates are folded in groups; each compressed update alone, in order.
  std::vector<absl::Status> status;
  status.reserve(updates.size());
  size_t start = 0;
  while (start < updates.size()) {
    const WeightedUpdate& first = updates[start];
    if (first.compressed != nullptr) {
      status.push_back(AccumulateCompressed(*first.compressed, first.num_examples, first.staleness,
                                            first.tensor_sum_squares));
      ++start;
      continue;
    }
    size_t end = start + 1;
    while (end < updates.size() && updates[end].compressed == nullptr) ++end;
    for (absl::Status& s : AccumulateDenseBatch(updates.subspan(start, end - start))) {
      status.push_back(std::move(s));
    }
    start = end;
  }
  return status;
}

std::vector<absl::Status> Aggregator::AccumulateDenseBatch(
    absl::Span<const WeightedUpdate> updates) {
  std::vector<absl::Status> status(updates.size());
  if (!is_averaging()) {
    for (size_t u = 0; u < updates.size(); ++u) {
      status[u] = Accumulate(*updates[u].delta, updates[u].num_examples, updates[u].staleness);
    }
    return status;
  }
  // The checks that need no fold; the survivors are folded in groups of up to kMaxFoldBatch,
  // one pass over the running sum per group.
  struct Candidate {
    size_t u;
    float w;
    double bound;  // FoldBound: largest |w u_i|, +Inf when unknown
    std::vector<int> index;
  };
  std::vector<Candidate> candidates;
  candidates.reserve(updates.size());
  int64_t examples = total_examples_;
  for (size_t u = 0; u < updates.size(); ++u) {
    Candidate c{u, 0.0f, 0.0, {}};
    double scale = 1.0;
    status[u] = Prepare(*updates[u].delta, updates[u].num_examples, updates[u].staleness, examples,
                        updates[u].tensor_sum_squares, &c.index, &scale);
    if (!status[u].ok()) continue;
    examples += updates[u].num_examples;
    c.w = static_cast<float>(static_cast<double>(updates[u].num_examples) * scale);
    c.bound = FoldBound(c.w, updates[u].tensor_sum_squares, updates[u].delta->tensors_size());
    candidates.push_back(std::move(c));
  }
  const int num_tensors = layout_.num_tensors();
  std::vector<const float*> ptrs;
  std::vector<float> weights;
  for (size_t start = 0; start < candidates.size(); start += ai::kMaxFoldBatch) {
    const int b = static_cast<int>(std::min<size_t>(ai::kMaxFoldBatch, candidates.size() - start));
    // ptrs[i * b + j]: tensor i (layout order) of the group's j-th update.
    ptrs.assign(static_cast<size_t>(num_tensors) * b, nullptr);
    weights.resize(b);
    double bound = 0.0;
    for (int j = 0; j < b; ++j) {
      const Candidate& c = candidates[start + j];
      weights[j] = c.w;
      bound += c.bound;
      const v1::Model& delta = *updates[c.u].delta;
      for (int k = 0; k < delta.tensors_size(); ++k) {
        ptrs[static_cast<size_t>(c.index[k]) * b + j] = delta.tensors(k).data().data();
      }
    }
    // As FoldWeighted: in place when the bound proves the group cannot fail (BeginFold).
    const FoldTarget t = BeginFold(bound);
    const float* in = t.in;
    float* out = t.out;
    const bool ok = ForEachSlice([&](int64_t begin, int64_t end) {
      bool slice_ok = true;
      ForTensorsIn(begin, end, [&](int i, int64_t lo, int64_t hi) {
        const float* u[ai::kMaxFoldBatch];
        for (int j = 0; j < b; ++j)
          u[j] = ptrs[static_cast<size_t>(i) * b + j] + (lo - layout_.offset(i));
        slice_ok &= ai::FoldBatchChecked(in == nullptr ? nullptr : in + lo, u, weights.data(), b,
                                         out + lo, hi - lo, streaming_);
      });
      return slice_ok;
    });
    EndFold(t, ok, bound);
    if (ok) {
      for (int j = 0; j < b; ++j) Commit(updates[candidates[start + j].u].num_examples);
    } else if (t.in_place) {
      for (int j = 0; j < b; ++j) status[candidates[start + j].u] = PoisonedError();
    } else {
      // Rare: some update holds a bad value or overflows. One at a time gives each its own
      // verdict and, in the same order, the very same sums.
      for (int j = 0; j < b; ++j) {
        const WeightedUpdate& w = updates[candidates[start + j].u];
        status[candidates[start + j].u] =
            AccumulateOne(*w.delta, w.num_examples, w.staleness, w.tensor_sum_squares);
      }
    }
  }
  return status;
}

absl::Status Aggregator::AggregateBuffered(std::vector<float>* delta) const {
  BufferedUpdates round;
  round.config = &config_;
  round.updates.reserve(buffered_.size());
  for (const std::vector<float>& u : buffered_) round.updates.push_back(u.data());
  round.num_examples = buffered_examples_;
  round.n = layout_.total_size();
  delta->resize(static_cast<size_t>(round.n));
  return rule_->Aggregate(
      round, [this](absl::FunctionRef<bool(int64_t, int64_t)> fn) { return ForEachSlice(fn); },
      delta->data());
}

namespace {

// The output tensors in `global`'s order, reusing `out`'s storage (Clear keeps the tensor
// objects and their capacity); the global and output data and global's position, by layout
// index (`index` maps global's tensors to layout indices).
void PrepareOutput(const v1::Model& global, const std::vector<int>& index,
                   const ModelLayout& layout, v1::Model* out, std::vector<const float*>* g_data,
                   std::vector<float*>* out_data, std::vector<int>* position) {
  out->Clear();
  out->mutable_tensors()->Reserve(global.tensors_size());
  for (int k = 0; k < global.tensors_size(); ++k) {
    const v1::Tensor& g = global.tensors(k);
    const int i = index[k];
    const int size = static_cast<int>(layout.size(i));
    v1::Tensor* t = out->add_tensors();
    t->set_name(g.name());
    *t->mutable_shape() = g.shape();
    t->mutable_data()->Reserve(size);
    (*out_data)[i] = t->mutable_data()->AddNAlreadyReserved(size);
    (*g_data)[i] = g.data().data();
    (*position)[i] = k;
  }
}

}  // namespace

absl::StatusOr<v1::Model> Aggregator::Finalize(const v1::Model& global) {
  v1::Model out;
  FEDSCHED_RETURN_IF_ERROR(FinalizeInto(global, &out));
  return out;
}

absl::Status Aggregator::CheckFinalizable(const v1::Model& global, const v1::Model* out) const {
  if (out == nullptr || out == &global) {
    return absl::InvalidArgumentError("FinalizeInto needs an output model distinct from global");
  }
  if (num_updates_ == 0) {
    return absl::FailedPreconditionError("no updates to aggregate in this round");
  }
  if (!(total_weight_ > 0.0)) {
    return absl::FailedPreconditionError("total weight of the round's updates is zero");
  }
  if (sum_poisoned_) return PoisonedError();
  return absl::OkStatus();
}

int Aggregator::ServerStepAll(const float* aggregate, const std::vector<const float*>& g_data,
                              const std::vector<float*>& out_data,
                              const std::vector<int>& position) {
  const ServerStepContext context{&config_, total_weight_, steps_};
  const float eta = static_cast<float>(config_.server_learning_rate());
  const float* sum = sum_[current_].data();
  const std::vector<std::vector<float>>& state = state_[state_current_];
  std::vector<std::vector<float>>& state_out = state_[1 - state_current_];
  // The first tensor (in global's order) whose step is not finite, over all slices.
  std::atomic<int> first_failed{std::numeric_limits<int>::max()};
  ForEachSlice([&](int64_t begin, int64_t end) {
    ForTensorsIn(begin, end, [&](int i, int64_t lo, int64_t hi) {
      const int64_t within = lo - layout_.offset(i);
      bool tensor_ok;
      if (aggregate != nullptr) {
        tensor_ok = ai::FoldChecked(g_data[i] + within, aggregate + lo, eta, out_data[i] + within,
                                    hi - lo, /*streaming=*/false);
      } else {
        ServerStepSpan span;
        span.sum = sum + lo;
        span.global = g_data[i] + within;
        span.out = out_data[i] + within;
        for (size_t s = 0; s < state_slots_.size(); ++s) {
          span.state[s] = state[s].data() + lo;
          span.state_out[s] = state_out[s].data() + lo;
        }
        tensor_ok = rule_->ServerStep(context, span, hi - lo);
      }
      if (!tensor_ok) {
        int seen = first_failed.load();
        while (position[i] < seen && !first_failed.compare_exchange_weak(seen, position[i])) {
        }
      }
    });
    return true;
  });
  const int failed = first_failed.load();
  return failed == std::numeric_limits<int>::max() ? -1 : failed;
}

absl::Status Aggregator::FinalizeInto(const v1::Model& global, v1::Model* out) {
  FEDSCHED_RETURN_IF_ERROR(CheckFinalizable(global, out));
  std::vector<int> index;
  FEDSCHED_RETURN_IF_ERROR(layout_.Match(global, &index));

  // Linear rules: one fused pass per tensor slice computes the new model, and the new optimiser
  // state into the spare state buffers (AggregationRule::ServerStep); the state is adopted only
  // once every value is finite. Non-linear rules: new model = global + eta * the rule's
  // aggregate, in one fused pass.
  std::vector<float> aggregate;
  if (!is_averaging()) FEDSCHED_RETURN_IF_ERROR(AggregateBuffered(&aggregate));
  // The spare sum buffer holds nothing now: freed before the new model is allocated, so a round's
  // close costs one model less at its peak (the server's peak RSS).
  std::vector<float>().swap(sum_[1 - current_]);

  const int num_tensors = layout_.num_tensors();
  std::vector<const float*> g_data(static_cast<size_t>(num_tensors));
  std::vector<float*> out_data(static_cast<size_t>(num_tensors));
  std::vector<int> position(static_cast<size_t>(num_tensors));  // in global's order
  PrepareOutput(global, index, layout_, out, &g_data, &out_data, &position);
  const int failed =
      ServerStepAll(is_averaging() ? nullptr : aggregate.data(), g_data, out_data, position);
  if (failed >= 0) {
    return absl::OutOfRangeError(
        absl::StrCat("the server step would make tensor '", global.tensors(failed).name(),
                     "' or the optimiser state non-finite; the aggregated delta is too large"));
  }
  if (!state_slots_.empty()) state_current_ = 1 - state_current_;
  ++steps_;
  Reset();
  // The sum is spent: its pages go back before the commit serialises the new model; the next
  // round's first fold allocates it again (fresh pages, about 1 ms per 4 MB).
  std::vector<float>().swap(sum_[current_]);
  return absl::OkStatus();
}

void Aggregator::Reset() {
  sum_is_zero_ = true;
  sum_bound_ = 0.0;
  sum_poisoned_ = false;
  std::vector<std::vector<float>>().swap(buffered_);
  buffered_examples_.clear();
  total_weight_ = 0.0;
  num_updates_ = 0;
  total_examples_ = 0;
}

}  // namespace fedsched
