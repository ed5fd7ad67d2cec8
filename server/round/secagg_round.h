// One secure-aggregation round inside the round engine (docs/guides/SECURE_AGGREGATION.md "Over the
// wire"): the steps of Bonawitz et al. (CCS 2017, section 4, figure 4) over the SecAgg+ graph
// (Bell et al., CCS 2020, section 3) laid over a synchronous round's tasks, with a deadline per
// step. The protocol itself is secagg::SecAggServer's; this class adds the cohort (task ->
// index), the timing (which step is open, when it closes), what each participant is owed next,
// and the FedAvg weights of the contributors.
//
// Pure like the engine: time is an argument (seconds on the caller's clock), no I/O.
#ifndef FEDSCHED_SERVER_ROUND_SECAGG_ROUND_H_
#define FEDSCHED_SERVER_ROUND_SECAGG_ROUND_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fedsched/v1/config.pb.h"
#include "fedsched/v1/coordinator.pb.h"
#include "fedsched/v1/secagg.pb.h"
#include "secagg/server.h"

namespace fedsched::round {

// The protocol step a secure-aggregation round is in.
enum class SecAggPhase {
  kAdvertise,    // step 0: collecting public keys
  kShareKeys,    // step 1: collecting sealed shares
  kMaskedInput,  // step 2: collecting masked inputs (the round's uploads)
  kUnmask,       // step 3: collecting revealed shares
  kDone,         // the sum is out, or the round failed
};

// What SecAggRound::Start needs.
struct SecAggRoundSpec {
  // A config resolved by ResolveRoundConfig (degree, threshold, step_timeout_s filled in for the
  // configured cohort; they are re-fitted to the actual cohort).
  v1::SecureAggregationConfig config;
  int64_t round = 0;
  // The cohort: task ids in planning order; task i is cohort member i.
  std::vector<std::string> task_ids;
  // 32 random bytes: the graph's relabelling (the server draws them from the OS; the simulator
  // derives them from its seed).
  std::string graph_seed;
  uint64_t vector_length = 0;  // model parameters
  double clip_norm = 0;        // L2 bound of each weighted update, > 0
  // FedAvg weights: the cohort's largest local_steps x batch_size, or 0 for uniform weights
  // (differential privacy).
  int64_t example_scale = 0;
  double now_s = 0;  // the round's start
};

class SecAggRound {
 public:
  // Fits degree and threshold to the cohort (at most n - 1 neighbours; a threshold at least a
  // strict majority of each neighbourhood), and opens step 0 until now_s + step_timeout_s.
  // Errors: FAILED_PRECONDITION for a cohort below 3 (the protocol needs three); those of
  // secagg::SecAggServer::Create.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<SecAggRound>> Start(
      const SecAggRoundSpec& spec);

  const v1::SecAggRoundParams& params() const { return params_; }
  SecAggPhase phase() const { return phase_; }
  // The task's cohort index, or nullopt for a task not in the cohort.
  std::optional<uint32_t> IndexOf(const std::string& task_id) const;
  // The Task.secagg the client of cohort member `index` receives.
  v1::SecAggTask TaskInfo(uint32_t index) const;
  // When the open step closes at the latest (caller's seconds); +infinity in kMaskedInput (the
  // round's own deadline rules) and kDone.
  double step_deadline_s() const { return step_deadline_s_; }

  // The step messages of cohort member `index`. Errors: FAILED_PRECONDITION when the step is
  // not open (closed, or not yet), the protocol's errors (INVALID_ARGUMENT, PERMISSION_DENIED)
  // for a message it refuses; the member then counts as dropped at that step.
  // An advertisement must be signed as the member's client (`client_id`) with the key bound to
  // its identity (`signing_public_key`, ClientProfile.signing_public_key; Bonawitz et al., CCS
  // 2017, section 6): else UNAUTHENTICATED (secagg::SecAggServer::AddAdvertisement).
  [[nodiscard]] absl::Status Advertise(uint32_t index, const v1::SecAggAdvertise& message,
                                       absl::string_view client_id,
                                       absl::string_view signing_public_key);
  [[nodiscard]] absl::Status ShareKeys(uint32_t index, const v1::SecAggShareKeys& message);
  // A masked input with its FedAvg weight (num_examples / example_scale, or 1). Errors: as
  // above.
  [[nodiscard]] absl::Status AddMaskedInput(uint32_t index, const v1::SecAggMaskedInput& input,
                                            double weight);
  [[nodiscard]] absl::Status Unmask(uint32_t index, const v1::SecAggUnmaskResponse& message);

  // The next step's input owed to member `index` (or done, or retry_after_ms). Errors:
  // FAILED_PRECONDITION when the member was dropped at an earlier step.
  [[nodiscard]] absl::StatusOr<v1::SecAggStepResponse> NextFor(uint32_t index) const;

  // Closes step 0 or 1 when every member it waits for has answered or `alive` says is gone, or
  // at its deadline. `alive(index)`: the member's task is still in flight. Returns true when a
  // step closed. Errors: the protocol's (fewer than t left): the round must fail.
  [[nodiscard]] absl::StatusOr<bool> AdvanceKeySteps(double now_s,
                                                     const std::function<bool(uint32_t)>& alive);
  // Closes step 2 (the round's uploads are over) and opens step 3 until now_s +
  // step_timeout_s. Members reported by a neighbour whose share did not authenticate are left
  // out (secagg::SecAggServer::RequestUnmasking). Errors: fewer than t inputs left, or a secret
  // without t holders left.
  [[nodiscard]] absl::Status BeginUnmasking(double now_s);
  // The reports that came with the share messages and the masked inputs: member -> the members
  // that could not verify its advertisement or authenticate its key shares
  // (secagg::SecAggServer::accusations).
  const absl::btree_map<uint32_t, absl::btree_set<uint32_t>>& accusations() const {
    return server_->accusations();
  }
  // Of them, the members reported for an advertisement whose signature did not verify.
  const absl::btree_set<uint32_t>& unverified() const { return server_->unverified(); }
  // True when step 3 may close: every survivor answered, or its deadline passed.
  bool UnmaskingComplete(double now_s) const;
  // Closes step 3: the unmasked sum (secagg::UnmaskedSum) and sum_k w_k over its contributors.
  struct Result {
    secagg::UnmaskedSum sum;
    double total_weight = 0;
  };
  [[nodiscard]] absl::StatusOr<Result> Finish();
  // True when member `index` did not complete a step that has closed (it is out of the round).
  bool dropped(uint32_t index) const;

 private:
  SecAggRound() = default;
  // Errors of a step message of member `index` naming `sender`: the step is not `phase`, the
  // member did not complete the step before it or already sent this one, or `sender` is not
  // `index` (PERMISSION_DENIED).
  [[nodiscard]] absl::Status CheckOpen(SecAggPhase phase, uint32_t index, uint32_t sender,
                                       const char* what) const;
  // Member `index` completed `phase`: it is owed a retry until the next step's input (or `done`
  // after unmasking).
  void Took(uint32_t index, SecAggPhase phase);

  v1::SecAggRoundParams params_;
  std::unique_ptr<secagg::SecAggServer> server_;
  absl::flat_hash_map<std::string, uint32_t> index_of_;
  int64_t example_scale_ = 0;
  double step_timeout_s_ = 0;
  double step_deadline_s_ = 0;
  SecAggPhase phase_ = SecAggPhase::kAdvertise;
  // Per member: the last step it completed (-1 none, else the SecAggPhase value: 0 advertised,
  // 1 shared, 2 masked input, 3 unmasked) and what the server owes it next.
  std::vector<int> completed_;
  std::vector<v1::SecAggStepResponse> owed_;
  std::vector<double> weight_;   // FedAvg weight of each contributor (else 0)
  std::vector<bool> left_out_;   // input sent but left out for unauthenticated shares
  int32_t unmask_asked_ = 0;     // survivors asked to unmask
  int32_t unmask_answered_ = 0;  // of them, answered
};

}  // namespace fedsched::round

#endif  // FEDSCHED_SERVER_ROUND_SECAGG_ROUND_H_
