// Server-side aggregation of client updates (docs/ALGORITHMS.md §5 and §6): streaming FedAvg, the
// FedOpt server optimisers, robust rules, update clipping and FedBuff staleness weighting. The
// rule's own arithmetic and properties live in its AggregationRule (aggregation_rule.h), chosen
// by name from the registry (aggregation_rule_registry.h); this class does what all rules share.
//
// Clients upload DELTAS: their trained weights minus the global model they downloaded. A round:
//
//   FEDSCHED_ASSIGN_OR_RETURN(auto agg, Aggregator::Create(config.aggregation(), global));
//   // For each arriving update (a rejected one leaves no trace):
//   absl::Status s = agg->Accumulate(delta, num_examples);
//   // At the end of the round (the next round starts empty):
//   FEDSCHED_ASSIGN_OR_RETURN(global, agg->Finalize(global));
//   // Persist agg->SaveState() with the round; on restart, Create(...) then RestoreState(saved).
//
// Memory. The averaging rules (FedAvg, FedAvgM, FedAdam, FedYogi, FedAdagrad) fold each update
// into a running example-weighted sum: 4 bytes per parameter whatever the number of clients when
// the caller hands in each update's sums of squares (AccumulateBatch's tensor_sum_squares, as the
// server does) and they prove the fold cannot overflow, so that it runs in place; otherwise the
// fold is double-buffered so that a rejected update leaves no trace (8 bytes per parameter). Plus
// 8 (FedAvgM) or 16 (FedAdam,
// FedYogi, FedAdagrad) bytes per parameter of double-buffered optimiser state; Finalize allocates
// nothing but the model it returns, FinalizeInto nothing at all when handed last round's model. The
// robust rules (trimmed mean, median, Krum, Multi-Krum) need every update at once: they keep a copy
// of each, so they hold up to max_buffered_updates x 4 bytes x parameters (Default: 1000 updates;
// 1000 x 1M parameters = 4 GB) and reject updates past that bound with RESOURCE_EXHAUSTED.
#ifndef FEDSCHED_SERVER_AGGREGATION_AGGREGATOR_H_
#define FEDSCHED_SERVER_AGGREGATION_AGGREGATOR_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fedsched/v1/compressed.pb.h"
#include "fedsched/v1/config.pb.h"
#include "fedsched/v1/tensor.pb.h"
#include "server/aggregation/aggregation_rule.h"
#include "server/aggregation/layout.h"

namespace Eigen {
class ThreadPoolInterface;
}  // namespace Eigen

namespace fedsched {

// Upper bound of AggregationConfig.fold_threads.
inline constexpr int kMaxFoldThreads = 64;

// `config` with every zero field replaced by its documented default, after range checks:
//   the rule resolved (ResolveAggregationRuleName): a built-in named by its enum value with
//   rule_name cleared (rule UNSPECIFIED -> FEDAVG), any other rule by rule_name with rule
//   UNSPECIFIED; the rule's own defaults (AggregationRule::ApplyDefaults), which for the
//   built-ins are: server_learning_rate: 1.0 (FedAvg, FedAvgM, robust rules),
//   0.1 (FedAdam, FedAdagrad), 0.01 (FedYogi); beta1: 0.9, but 0 for FedAdagrad (Flower's
//   FedAdagrad pins beta_1 = 0, i.e. m = delta); beta2: 0.99; tau: 1e-9 (FedAdam, FedAdagrad),
//   1e-3 (FedYogi); server_momentum: 0.9 (config.proto's pin; Flower's FedAvgM defaults to 0);
//   trim_beta: 0.2; krum_byzantine: 1 (Flower's: 0); beta1, beta2, server_momentum, trim_beta
//   and krum_byzantine have presence: an explicit 0 is kept; multi_krum_m stays 0
//   (meaning "number of updates - f"); max_buffered_updates: 1000; max_staleness: 10;
//   fold_threads: min(hardware threads, 4).
// Errors: INVALID_ARGUMENT naming the field when a value is out of range: negative rates, tau,
// clip norm, counts or staleness; fold_threads outside [0, 64]; beta1, beta2 or server_momentum
// outside [0, 1); trim_beta outside [0, 0.5); an unknown rule or rule_name, or a rule and
// rule_name naming different rules.
[[nodiscard]] absl::StatusOr<v1::AggregationConfig> EffectiveAggregationConfig(
    const v1::AggregationConfig& config);

// FedAdam's bias correction sqrt(1 - beta2^t) / (1 - beta1^t) (Kingma & Ba 2015, the step size
// alpha_t before section 2.1), as Flower's FedAdam (>= 1.13) applies it to eta. Flower takes
// t = server_round + 1 with server_round counting from 1, so the aggregator's n-th server step
// (n from 0) uses t = n + 2. Requires beta1, beta2 in [0, 1) and t >= 1.
double AdamBiasCorrection(double beta1, double beta2, int64_t t);

// FedBuff's staleness weight 1 / sqrt(1 + staleness) (Nguyen et al., AISTATS 2022, section 3).
// `staleness` >= 0 is the number of global model versions the update's base model is behind.
double StalenessWeight(int64_t staleness);

// Aggregates one round of client deltas into a new global model with the configured rule.
// Not thread-safe: the caller serialises all calls. Not copyable.
//
// Threads. The folds and the server step of the averaging rules, and the coordinate-wise robust
// rules, split the model's flat coordinate range into up to fold_threads contiguous slices (at
// least 512K values each, so models under 1M parameters use one) and run one slice on the
// calling thread and the others on the aggregator's own pool of fold_threads - 1 threads.
// Every coordinate sees the same operations in the same order whatever the split, so results are
// bit-identical for any fold_threads.
class Aggregator {
 public:
  // Creates an aggregator for models shaped like `global` (names, shapes; values are read only to
  // check they are finite), with empty accumulation and zero optimiser state, running the rule
  // `config` selects (CreateAggregationRule).
  // Errors: INVALID_ARGUMENT from EffectiveAggregationConfig, or if `global` is not a well-formed
  // model (see ValidateModel in checks.h: no tensors, empty or duplicate names, bad shapes,
  // non-finite values).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Aggregator>> Create(
      const v1::AggregationConfig& config, const v1::Model& global);

  Aggregator(const Aggregator&) = delete;
  Aggregator& operator=(const Aggregator&) = delete;
  ~Aggregator();

  // Validates `delta` (client's trained weights minus the global model it downloaded) against
  // the global model's names and shapes (tensors matched by name, any order) and folds it in with
  // weight `num_examples` (FedAvg, McMahan et al. 2017: sum_k n_k d_k / sum_k n_k). When
  // clip_update_norm > 0 the delta is first scaled by min(1, clip / ||delta||_2), the L2 norm
  // taken over all tensors. Cost: for the averaging rules one fused pass that folds and checks
  // (plus one read-only pass when clipping); for the robust rules a check pass and a copy.
  // On any error nothing is folded and the accumulator is exactly as before. Errors:
  //   INVALID_ARGUMENT: wrong shape, missing / extra / duplicate tensor, data size != shape,
  //     a NaN or Inf value (the message names the tensor and the index), num_examples <= 0,
  //     total_examples() would overflow int64, or the float32 running sum would overflow.
  //   RESOURCE_EXHAUSTED: a robust rule already holds max_buffered_updates updates.
  [[nodiscard]] absl::Status Accumulate(const v1::Model& delta, int64_t num_examples);

  // As above, for an update computed on a global model `staleness` versions old (asynchronous
  // FedBuff, Nguyen et al. 2022): the delta is scaled by StalenessWeight(staleness) =
  // 1/sqrt(1 + staleness) before it is folded; its num_examples still counts fully in the
  // denominator, so stale updates move the model less. staleness 0 is the synchronous case.
  // Additional errors: INVALID_ARGUMENT if staleness < 0; FAILED_PRECONDITION if
  // staleness > max_staleness (Default: 10).
  [[nodiscard]] absl::Status Accumulate(const v1::Model& delta, int64_t num_examples,
                                        int64_t staleness);

  // Update compression (docs/ARCHITECTURE.md "Compressed updates"; docs/ALGORITHMS.md §13): an
  // update uploaded as a CompressedModel, checked against the model's layout
  // (compress::MatchCompressedModel: names, element counts, shapes, each payload's declared format
  // and sizes) and, for the averaging rules, decompressed straight into the running float32 sum
  // (compress::Fold, one pass per tensor, no float32 copy of the update). The sums are
  // bit-identical to Accumulate() of compress::Decode() of the same payloads, with the same
  // weight, staleness and clipping. Clipping takes the norm of the decompressed update
  // (CompressedSumSquares, or the caller's `sum_squares` of it) and folds with the clipped
  // weight; the robust rules (needs_all_updates) decode the update and keep it as Accumulate()
  // does. Tensors are folded whole, each by one thread (the fold slice holding its first value).
  // In place (one sum buffer) when the payloads bound the fold away from float32 overflow: QSGD
  // and HADAMARD_1BIT by their scales, FP16, TOPK and FLOAT32 by their largest value (a read of
  // the packed values); else into the spare buffer. On any error nothing is folded and the
  // accumulator is exactly as before. Errors: Accumulate()'s, and INVALID_ARGUMENT naming the
  // tensor for a malformed payload (MatchCompressedModel's message) or one that decodes to a
  // NaN or Inf or overflows the sum.
  [[nodiscard]] absl::Status AccumulateCompressed(const v1::CompressedModel& update,
                                                  int64_t num_examples, int64_t staleness = 0,
                                                  absl::Span<const double> sum_squares = {});

  // TensorSumSquares(Decode(update)) (the same bits), after the checks of AccumulateCompressed:
  // one double per tensor of `update`, in its order, each tensor decoded in turn into a scratch
  // of its size (never the whole update). What the server's norm screens and clipping read of a
  // compressed update. Errors: INVALID_ARGUMENT for a malformed payload (MatchCompressedModel)
  // or a value that decodes to NaN or Inf.
  [[nodiscard]] absl::StatusOr<std::vector<double>> CompressedSumSquares(
      const v1::CompressedModel& update) const;
  // The same against `reference`'s names and shapes (its data is not read), for a caller without
  // an aggregator (the server's norm screen, before it takes the engine's lock).
  [[nodiscard]] static absl::StatusOr<std::vector<double>> CompressedSumSquares(
      const v1::CompressedModel& update, const v1::Model& reference);

  // The float32 model `update` decodes to, tensors in its order (names and shapes of the model),
  // after the checks of AccumulateCompressed. For the robust rules and callers that need the
  // dense update. Errors: as CompressedSumSquares.
  [[nodiscard]] absl::StatusOr<v1::Model> DecodeCompressed(const v1::CompressedModel& update) const;

  // One update of a batch: `delta` (or `compressed`) is not owned and must outlive the call.
  struct WeightedUpdate {
    const v1::Model* delta = nullptr;
    int64_t num_examples = 0;
    int64_t staleness = 0;  // model versions behind (FedBuff); 0 for synchronous rounds
    // Optional: TensorSumSquares(*delta), already computed by the caller (the server's norm
    // screen), so that clipping does not read the update a second time and the fold can run in
    // place (its norm bounds every value); empty (or of another length than delta's tensors):
    // computed here when clipping, and the fold is double-buffered. Trusted: it must be of this
    // very delta (of the decoded update for `compressed`: CompressedSumSquares).
    absl::Span<const double> tensor_sum_squares;
    // Instead of `delta` (exactly one is set): a compressed update, folded by
    // AccumulateCompressed in its place in the batch's order.
    const v1::CompressedModel* compressed = nullptr;
  };

  // The sum of squares of each tensor's values: one double per tensor of `delta`, in its tensor
  // order (the squares summed in double, per block of floats). ||delta||_2 of the clipping step
  // above (norm clipping as in DP-FedAvg, McMahan et al., ICLR 2018, section 2) is the square
  // root of their sum, so a caller that needs the norm anyway (the server's norm screen) hands
  // them to AccumulateBatch and the update is read once, not twice. Inf or NaN for a
  // tensor holding a non-finite value. No errors.
  static std::vector<double> TensorSumSquares(const v1::Model& delta);

  // Accumulate() for several updates at once, with the same checks, the same per-update verdicts
  // and bit-identical sums as calling Accumulate() on each in order; returns one status per
  // update (a rejected update leaves no trace, the others are folded). The averaging rules fold
  // up to 8 updates per pass over the running sum, which moves about 1 + 3/8 bytes of memory per
  // byte of update instead of 3 to 4: use it when several updates are waiting (see
  // docs/reports/BENCHMARKS.md). The robust rules simply call Accumulate() on each. A compressed
  // update is folded alone (AccumulateCompressed), between the groups of the float32 ones.
  std::vector<absl::Status> AccumulateBatch(absl::Span<const WeightedUpdate> updates);

  // Hierarchical aggregation (docs/ARCHITECTURE.md "Hierarchical aggregation"): folds another
  // aggregator's partial sum S = sum_k n_k c_k d_k (TakePartialSum) with weight 1, no clipping
  // (each d_k was clipped where it was folded), counting `total_examples` = sum_k n_k in the
  // denominator and `num_updates` updates. Finalize then gives what folding every d_k here
  // would, up to float32 rounding of the changed summation order. Nothing changes on error.
  // Errors: FAILED_PRECONDITION for a robust rule (it needs the individual updates);
  // INVALID_ARGUMENT for a wrong shape or a missing / extra tensor, a NaN or Inf, total_examples
  // or num_updates <= 0 or an overflowing example count, or a float32 overflow of the sum.
  [[nodiscard]] absl::Status AccumulatePartial(const v1::Model& weighted_sum,
                                               int64_t total_examples, int64_t num_updates);

  // The running weighted sum sum_k n_k c_k d_k of the updates accumulated since the last
  // Finalize / Reset / TakePartialSum, as a model with the global model's names and shapes, and
  // its total examples, for an aggregator to forward upstream; resets the accumulation (the
  // optimiser state is untouched and unused). Errors: FAILED_PRECONDITION for a robust rule, or
  // when no update was accumulated.
  struct PartialSum {
    v1::Model sum;
    int64_t total_examples = 0;
    int64_t num_updates = 0;
  };
  [[nodiscard]] absl::StatusOr<PartialSum> TakePartialSum();

  // The mean of the updates accumulated since the last Finalize / Reset, sum_k w_k c_k d_k /
  // sum_k w_k, flat in layout() order (layout().total_size() floats), into `*out`; nothing changes.
  // What staleness-aware aggregation compares a late update with (stale_updates.h). Errors:
  // FAILED_PRECONDITION for a rule that keeps individual updates, or when nothing was
  // accumulated.
  [[nodiscard]] absl::Status RunningMean(std::vector<float>* out) const;

  // Differential privacy (server/privacy, docs/guides/PRIVACY.md; McMahan et al., ICLR 2018,
  // Algorithm 1): calls `perturb` once on the running sum sum_k w_k c_k d_k (flat, in layout()
  // order: tensor i at layout().offset(i)), e.g. to add Gaussian noise, and makes `denominator` the
  // round's total weight W (the fixed-denominator estimator: D = sum / W). Call it just before
  // Finalize. Errors: FAILED_PRECONDITION for a robust rule or when no update was accumulated;
  // INVALID_ARGUMENT for a denominator that is not finite and > 0; `perturb`'s error (it must
  // then leave the sum unchanged). Nothing changes on error.
  [[nodiscard]] absl::Status PerturbSum(absl::FunctionRef<absl::Status(absl::Span<float>)> perturb,
                                        double denominator);
  // Sets the L2 clip norm applied to every later update (0 = no clipping): differential privacy
  // changes it every round (adaptive clipping, Andrew et al., NeurIPS 2021). Must be >= 0.
  void set_clip_update_norm(double clip) { config_.set_clip_update_norm(clip); }

  // Updates accepted since the last Finalize / Reset.
  int64_t num_updates() const { return num_updates_; }
  // Sum of their num_examples.
  int64_t total_examples() const { return total_examples_; }
  // Model-sized running-sum buffers held now (0, 1 or 2; 4 bytes per parameter each): 1 while
  // every fold of the round ran in place, 2 once one needed the spare (tests, memory accounting).
  int sum_buffers_held() const {
    return static_cast<int>(!sum_[0].empty()) + static_cast<int>(!sum_[1].empty());
  }

  // Returns the new global model = global + server step on the aggregated delta, with the
  // tensors in `global`'s order, and resets the accumulator for the next round. Optimiser state
  // (momentum, Adam m / v) is kept. Aggregated delta D per rule:
  //   FedAvg & FedOpt rules: D = sum_k n_k s_k d_k / sum_k n_k (s_k: staleness weight x clip).
  //   Trimmed mean (Yin et al. 2018): per coordinate, drop the floor(trim_beta * K) largest and
  //     smallest values, average the rest (unweighted). Median: per coordinate (unweighted; mean of
  //     the two middle values when K is even).
  //   Krum (Blanchard et al. 2017; Flower's aggregate_krum): the update with the least sum of
  //     squared L2 distances to its max(1, K - f - 2) nearest other updates (fewer when K is
  //     smaller), any K >= 1. Multi-Krum: the example-weighted mean of the m updates with the
  //     least such scores (m = multi_krum_m, or max(1, K - f) when 0; capped at K).
  // Server step (Reddi et al., ICLR 2021, Algorithm 2; Hsu et al. 2019 for FedAvgM; Flower's
  // strategies), element-wise with eta = server_learning_rate:
  //   FedAvg & robust rules: w += eta * D.
  //   FedAvgM:   v = momentum * v + D;                        w += eta * v.
  //   FedAdam:   m = b1 m + (1-b1) D;  v = b2 v + (1-b2) D^2;
  //              w += eta * AdamBiasCorrection(b1, b2, step + 2) * m / (sqrt(v) + tau).
  //   FedYogi:   m as Adam;  v = v - (1-b2) D^2 sign(v - D^2);  w as Adam.
  //   FedAdagrad: m as Adam (b1 = 0 by default);  v = v + D^2;  w as Adam.
  // Errors (nothing changes on error; the round's updates stay accumulated):
  //   FAILED_PRECONDITION: no updates, or a total weight of zero (never a NaN model).
  //   INVALID_ARGUMENT: `global` does not match the shapes given to Create.
  //   OUT_OF_RANGE: the step would produce a non-finite model or optimiser state.
  [[nodiscard]] absl::StatusOr<v1::Model> Finalize(const v1::Model& global);

  // Finalize() writing the new model into `*out`, whose storage is reused: pass the model that
  // the previous round's Finalize returned (or any model) to avoid allocating, and paying a page
  // fault per 4 KiB of, a fresh model every round. `out` must not be `&global`. Same errors as
  // Finalize(), plus INVALID_ARGUMENT if out is null or aliases global; on error the aggregator
  // is unchanged and *out holds unspecified (but valid) contents.
  [[nodiscard]] absl::Status FinalizeInto(const v1::Model& global, v1::Model* out);

  // Drops the current round's accumulation (e.g. the round failed); keeps optimiser state.
  void Reset();

  // Optimiser state, to persist with each committed round (RunMeta.optimizer_state) so that a
  // restarted server resumes exactly. Tensors: "__aggregator__/rule" (scalar, the rule's enum
  // value; 0 for a rule registered by name only), "__aggregator__/steps" (scalar, server steps
  // taken), and per state slot SLOT of the rule (AggregationRule::StateSlots) and model tensor
  // NAME "SLOT/NAME": "momentum/NAME" (FedAvgM), "m/NAME" and "v/NAME" (FedAdam, FedYogi,
  // FedAdagrad).
  v1::Model SaveState() const;

  // Restores state saved by SaveState() of an aggregator with the same rule and model shapes.
  // An empty model restores the initial (zero) state. Does not touch the current accumulation.
  // Errors: INVALID_ARGUMENT if the rule differs, a tensor is missing, extra, misshapen or
  // non-finite, or the rule refuses a slot's values (AggregationRule::CheckState; e.g. a negative
  // FedOpt second moment v). On error the state is unchanged.
  [[nodiscard]] absl::Status RestoreState(const v1::Model& state);

  // The configuration in effect (defaults filled in).
  const v1::AggregationConfig& config() const { return config_; }
  // The rule in effect, and its properties.
  const AggregationRule& rule() const { return *rule_; }
  const AggregationRuleProperties& rule_properties() const { return properties_; }
  // The model layout the aggregator was created for.
  const ModelLayout& layout() const { return layout_; }
  // Slices the coordinate range is split into for the folds (1 = single-threaded).
  int fold_slices() const { return static_cast<int>(slice_starts_.size()) - 1; }

 private:
  Aggregator(const v1::AggregationConfig& config, ModelLayout layout,
             std::unique_ptr<AggregationRule> rule);

  // Whether the rule folds updates into a running sum (else it keeps every update).
  bool is_averaging() const { return !properties_.needs_all_updates; }
  // The checks of Accumulate that need no fold: example count (against `examples_so_far`),
  // staleness, buffer room, names and shapes (into `index`), and the clipping norm (into `scale`,
  // together with the staleness weight).
  // `sum_squares`: TensorSumSquares(delta) if the caller has it, else empty.
  [[nodiscard]] absl::Status Prepare(const v1::Model& delta, int64_t num_examples,
                                     int64_t staleness, int64_t examples_so_far,
                                     absl::Span<const double> sum_squares, std::vector<int>* index,
                                     double* scale) const;
  // Prepare's checks that read no update: example count, staleness, buffer room.
  [[nodiscard]] absl::Status PrepareCounts(int64_t num_examples, int64_t staleness,
                                           int64_t examples_so_far) const;
  // AccumulateBatch for float32 updates only.
  std::vector<absl::Status> AccumulateDenseBatch(absl::Span<const WeightedUpdate> updates);
  // AccumulateCompressed's fold of a matched update (`index`: MatchCompressedModel's) with
  // weight `w` into the running sum, as FoldWeighted; the error names the failing tensor.
  [[nodiscard]] absl::Status FoldCompressed(const v1::CompressedModel& update,
                                            const std::vector<int>& index, float w);
  // Allocates sum_[current_] and, with `spare`, the other buffer, if they are not allocated.
  void EnsureSumBuffer(bool spare);
  // An upper bound on max_i |w u_i| for an update u with the given TensorSumSquares (its L2 norm
  // bounds every value): +Inf when the sums are missing or not finite.
  static double FoldBound(float w, absl::Span<const double> sum_squares, int num_tensors);
  // Whether a fold adding at most `bound` to any |running sum value| can run in place: it cannot
  // overflow float32 when sum_bound_ + bound <= kInPlaceSumBound, so it cannot fail and needs no
  // spare buffer to fall back on (one sum buffer instead of two).
  bool InPlaceSafe(double bound) const;
  // Where a fold adding at most `bound` (FoldBound) to any |sum value| reads and writes the
  // running sum: `first` (the round's first fold: straight into the current buffer, `in` null),
  // `in_place` (InPlaceSafe: in == out, the current buffer), else current into the spare.
  struct FoldTarget {
    bool first = false;
    bool in_place = false;
    const float* in = nullptr;
    float* out = nullptr;
  };
  // Allocates the buffers `t` needs (EnsureSumBuffer) and returns it.
  FoldTarget BeginFold(double bound);
  // After the fold into `t`: adopts it when `ok`; else the sum is unchanged (spare), or, for an
  // in-place fold the bound should have ruled out, poisoned (FinalizeInto then fails).
  void EndFold(const FoldTarget& t, bool ok, double bound);
  // AccumulateOne with TensorSumSquares(delta) when the caller has them (else empty).
  [[nodiscard]] absl::Status AccumulateOne(const v1::Model& delta, int64_t num_examples,
                                           int64_t staleness, absl::Span<const double> sum_squares);
  [[nodiscard]] static absl::Status PoisonedError();
  // Runs fn(begin, end) once per slice [begin, end) of the flat coordinate range, slice 0 on the
  // calling thread and the others on pool_, and waits for all; true iff every call returned true.
  bool ForEachSlice(absl::FunctionRef<bool(int64_t begin, int64_t end)> fn) const;
  // Calls fn(i, lo, hi) for each layout tensor i with values in [begin, end): [lo, hi) is the
  // overlap, in flat coordinates (tensor i's own index is lo - layout_.offset(i)).
  void ForTensorsIn(int64_t begin, int64_t end,
                    absl::FunctionRef<void(int i, int64_t lo, int64_t hi)> fn) const;
  // The error for an update whose fold failed (matched by `index`): the first tensor, in the
  // update's order, holding a NaN or Inf, or else the first whose weighted fold into the running
  // sum overflows. Writes only the spare sum buffer.
  [[nodiscard]] absl::Status FoldError(const v1::Model& delta, const std::vector<int>& index,
                                       float w, int64_t num_examples);
  // Folds `delta` (matched to the layout by `index`) with weight `w` into the running sum: in
  // place when InPlaceSafe(bound) (`bound`: FoldBound, +Inf if unknown), else double-buffered;
  // false, and the sum unchanged, when a value is not finite or overflows.
  bool FoldWeighted(const v1::Model& delta, const std::vector<int>& index, float w, double bound);
  void Commit(int64_t num_examples);
  // RestoreState's reading of state slot `slot` (every model tensor, by name from `by_name`)
  // into `restored`, after the shape, finiteness and rule's checks.
  [[nodiscard]] absl::Status RestoreSlot(
      const absl::flat_hash_map<std::string, const v1::Tensor*>& by_name, int slot,
      std::vector<float>* restored) const;
  // FinalizeInto's preconditions that need no model: an output distinct from `global`, updates
  // with a positive total weight, a sum not poisoned.
  [[nodiscard]] absl::Status CheckFinalizable(const v1::Model& global, const v1::Model* out) const;
  // Non-linear rules: the rule's aggregate of the buffered updates (AggregationRule::Aggregate).
  [[nodiscard]] absl::Status AggregateBuffered(std::vector<float>* delta) const;
  // The server step over every slice: out_data[i] (by layout index) = the new tensor i from
  // g_data[i] and the running sum through the rule's ServerStep, writing the new optimiser state
  // into the spare state buffers; or, given a non-linear rule's `aggregate`, g + eta * aggregate.
  // Returns the position (position[i]: global's order) of the first tensor whose step is not
  // finite, or -1 when all are.
  int ServerStepAll(const float* aggregate, const std::vector<const float*>& g_data,
                    const std::vector<float*>& out_data, const std::vector<int>& position);

  v1::AggregationConfig config_;
  ModelLayout layout_;
  // The layout as a model of names and shapes without data (MatchCompressedModel's reference).
  v1::Model shapes_;
  std::unique_ptr<AggregationRule> rule_;
  AggregationRuleProperties properties_;
  std::vector<std::string> state_slots_;  // rule_->StateSlots()

  // Averaging rules: the running sum_k w_k d_k over the flat layout is sum_[current_]. An update
  // whose fold provably cannot overflow (InPlaceSafe: finite values, known norm) is folded in
  // place; any other is folded into the other buffer, adopted only if the update is accepted, so
  // that a rejected update leaves no trace either way. Allocated on the first update (the spare
  // on the first fold that needs it); both freed by FinalizeInto.
  std::vector<float> sum_[2];
  int current_ = 0;
  bool sum_is_zero_ = true;
  // An upper bound on max_i |sum_[current_][i]|: the sum of the folded updates' FoldBound; +Inf
  // once an update without a known norm (or PerturbSum's noise) went in.
  double sum_bound_ = 0.0;
  // Folds in place while sum_bound_ stays under this (2^120; float32 overflows at 2^128).
  static constexpr double kInPlaceSumBound = 0x1p120;
  static constexpr double kInf = std::numeric_limits<double>::infinity();
  // Set if an in-place fold failed despite its bound (cannot happen); FinalizeInto then fails.
  bool sum_poisoned_ = false;
  // Fold with non-temporal stores (large models).
  bool streaming_ = false;
  // Robust rules: one scaled copy of each accepted update.
  std::vector<std::vector<float>> buffered_;
  std::vector<int64_t> buffered_examples_;  // num_examples of each buffered update

  double total_weight_ = 0.0;
  int64_t num_updates_ = 0;
  int64_t total_examples_ = 0;

  // Optimiser state over the flat layout, one vector per state slot (none when the rule has
  // none), double-buffered like the sum: state_[state_current_] is the state; Finalize writes the
  // other and adopts it on success.
  std::vector<std::vector<float>> state_[2];
  int state_current_ = 0;
  int64_t steps_ = 0;
  std::vector<int> scratch_index_;
  std::vector<const float*> scratch_ptrs_;

  // ForEachSlice: slice s is [slice_starts_[s], slice_starts_[s + 1]); pool_ is null when there
  // is one slice.
  std::vector<int64_t> slice_starts_;
  std::unique_ptr<Eigen::ThreadPoolInterface> pool_;
};

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_AGGREGATION_AGGREGATOR_H_
