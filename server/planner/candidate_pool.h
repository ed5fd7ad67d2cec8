// The candidate pool every selection policy works on: one evaluated Candidate per client of the
// round, a "stage" of (key, position) pairs that a selection step draws from, and the positions
// chosen so far, in selection order. The staging helpers (FillStage, TakeTop, TakeRandom,
// TakeWeighted) are the building blocks of the policies' stages (docs/ALGORITHMS.md §3 and §4).
//
// The buffers are reused across rounds, so that a round allocates O(participants), not
// O(candidates). Not thread-safe; the planner serialises its rounds.
#ifndef FEDSCHED_SERVER_PLANNER_CANDIDATE_POOL_H_
#define FEDSCHED_SERVER_PLANNER_CANDIDATE_POOL_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "absl/types/span.h"
#include "server/planner/selection_draws.h"
#include "server/profile/profile_book.h"

namespace fedsched::planner {

using profile::ClientIndex;

// Selection weights are floored here so that zero-score clients are still drawable (last).
inline constexpr double kMinSelectionWeight = 1e-12;

// Where a candidate stands in the current round's selection.
enum CandidateStatus : uint8_t { kAvailable = 0, kSelected = 1, kRejected = 2 };

// Why a participant was taken; NoteText gives SelectionReason.note.
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

// SelectionReason.note for `note`: "", "random", "oort-initial-random", "oort-exploit",
// "oort-explore", "oort-fill-exploit", "oort-fill-explore", "fedcase-top-experience",
// "fedcase-random" or "fedcase-completion-fill". Never null.
const char* NoteText(Note note);

// One evaluated candidate. Kept small (56 bytes): a policy scans one per candidate several
// times a round. Reason details of the few participants are recomputed after selection.
struct Candidate {
  ClientIndex index = 0;
  int32_t steps = 0;      // local steps, after workload sizing
  int32_t batch = 0;      // minibatch size, after the memory fit check (docs/ALGORITHMS.md §8)
  double t_s = 0;         // predicted seconds at `steps`
  double utility = 0;     // raw statistical utility (reported, or at registration)
  double score = 0;       // Oort's score / exploration weight (the base set's rank)
  double experience = 0;  // FedCaSe experience (fedcase only)
  // PyramidFL update dropout: the probability of dropping each tensor, and the predicted upload
  // seconds it saves (already taken off t_s).
  double dropout = 0;
  double dropout_saved_s = 0;
  uint8_t status = kAvailable;
  uint8_t note = kNoteNone;
  // Its compression level: an index into PlannerOptions::compression.levels (§13).
  uint8_t level = 0;
  bool tried = false;    // selected before: Oort's "explored" pool
  bool fits = true;      // predicted to finish by the deadline at the fewest steps (FedCaSe)
  bool mem_fits = true;  // some batch >= min_batch_size fits its memory budget (§8)
  bool exploited = false;
  bool explore_pick = false;
  bool experienced = false;  // completed a task before: `experience` is its own (fedcase only)
};

// A selection step's entry: a rank or weight `key` and a position `pos` (in the pool, or a
// client index for policies that evaluate lazily; see RandomPolicy).
struct Keyed {
  double key;
  uint32_t pos;
};

// The candidates of one round, the stage and the chosen positions. Typical use by a policy:
// Claim() each request candidate once, Add() its evaluation, then per selection step
// FillStage() and one of the Take*() calls with an `ok` callback that checks availability and
// calls Choose().
class CandidatePool {
 public:
  // Starts a round over a book of `num_clients` clients: empties the pool, the stage and the
  // chosen list, and forgets which clients were claimed. O(1) amortised (O(num_clients) once
  // every 2^32 rounds, or when the book grew).
  void BeginRound(size_t num_clients);

  // True the first time `index` (< num_clients) is claimed this round; false for a duplicate.
  // A claim followed at once by Add() gives the candidate of `index` (see PositionOf).
  bool Claim(ClientIndex index) {
    Stamp& st = stamp_[index];
    if (st.serial == serial_) return false;
    st = {serial_, static_cast<uint32_t>(pool_.size())};
    return true;
  }
  // The pool position of client `index` (< num_clients) when it was claimed this round and the
  // Add() right after its claim holds it (c.index == index), else kNoPosition. O(1).
  static constexpr uint32_t kNoPosition = UINT32_MAX;
  uint32_t PositionOf(ClientIndex index) const {
    const Stamp& st = stamp_[index];
    if (st.serial != serial_ || st.pos >= pool_.size() || pool_[st.pos].index != index) {
      return kNoPosition;
    }
    return st.pos;
  }

  // Appends a default Candidate and returns it (references are invalidated by the next Add).
  Candidate& Add() { return pool_.emplace_back(); }
  // Candidates added this round.
  size_t size() const { return pool_.size(); }
  bool empty() const { return pool_.empty(); }
  // The candidate at pool position `pos` (< size()).
  Candidate& operator[](uint32_t pos) { return pool_[pos]; }
  const Candidate& operator[](uint32_t pos) const { return pool_[pos]; }
  // All candidates of the round, by pool position.
  std::vector<Candidate>& candidates() { return pool_; }
  const std::vector<Candidate>& candidates() const { return pool_; }

  // Selects pool position `pos` with `note`: status kSelected, appended to chosen().
  void Choose(uint32_t pos, Note note) {
    pool_[pos].status = kSelected;
    pool_[pos].note = note;
    chosen_.push_back(pos);
  }
  // Pool positions of the selected candidates, in selection order.
  const std::vector<uint32_t>& chosen() const { return chosen_; }
  // chosen().size().
  size_t num_chosen() const { return chosen_.size(); }
  // Keeps the min(n, num_chosen()) chosen candidates with the smallest t_s (ties by selection
  // order), fastest first; the others become kRejected (FedCaSe keeps the fastest of its
  // joined set, docs/ALGORITHMS.md §4.2). O(chosen log chosen).
  void KeepFastestChosen(size_t n);

  // The stage: the entries the next Take*() draws from.
  std::vector<Keyed>& stage() { return stage_; }
  // Replaces the stage with {key(c), pos} for every kAvailable candidate c with pred(c), in
  // pool order.
  template <typename Pred, typename Key>
  void FillStage(Pred&& pred, Key&& key);
  // The key of the n-th largest stage entry, n in [1, stage().size()]; partially reorders the
  // stage (std::nth_element).
  double NthLargestStageKey(size_t n);
  // Drops stage entries with key < min_key, keeping the order of the others.
  void KeepStageKeysAtLeast(double min_key);
  // Keeps the `n` stage entries with the largest keys (all when there are fewer), in no
  // particular order.
  void KeepBestOfStage(size_t n);
  // Sorts the min(count, stage().size()) best stage entries first, best first (ties by
  // position), and returns them.
  absl::Span<const Keyed> BestOfStage(size_t count);

  // The Take*() steps offer stage entries to `ok(pos) -> bool`, which takes a feasible entry
  // (typically Choose()) and returns true, or returns false (and may mark it kRejected). Each
  // entry is offered at most once. They stop after `need` acceptances or when the stage is
  // exhausted, and return the number accepted.

  // Offers entries by decreasing key, in blocks of the still missing count (ties in no
  // particular order). O(stage) expected per block.
  template <typename Ok>
  size_t TakeTop(size_t need, Ok&& ok);
  // Offers entries in uniformly random order, one draws.PickUniform per offer. With
  // `positions_are_clients`, stage positions are client indices (RandomPolicy's lazy stage),
  // else pool positions.
  template <typename Ok>
  size_t TakeRandom(size_t need, SelectionDraws& draws, Ok&& ok,
                    bool positions_are_clients = false);
  // Successive sampling without replacement, p ~ key (floored at kMinSelectionWeight), among
  // stage entries whose pool candidate is still kAvailable. Stage positions must be pool
  // positions, and `ok` must leave every candidate it is offered not kAvailable (Choose() it,
  // or mark it kRejected), or it may be offered again.
  // One draws.PickWeighted per draw (a draw that hits a taken entry is redrawn).
  template <typename Ok>
  size_t TakeWeighted(size_t need, SelectionDraws& draws, Ok&& ok);

 private:
  std::vector<Candidate> pool_;
  std::vector<Keyed> stage_;
  std::vector<double> prefix_;    // TakeWeighted's prefix sums of the stage's weights
  std::vector<uint32_t> chosen_;  // positions in pool_ of the selected, in selection order
  // stamp_[client].serial == serial_: claimed this round, when the pool held `pos` candidates.
  struct Stamp {
    uint32_t serial = 0;
    uint32_t pos = 0;
  };
  std::vector<Stamp> stamp_;
  uint32_t serial_ = 0;
};

template <typename Pred, typename Key>
void CandidatePool::FillStage(Pred&& pred, Key&& key) {
  stage_.clear();
  for (uint32_t pos = 0; pos < pool_.size(); ++pos) {
    const Candidate& c = pool_[pos];
    if (c.status == kAvailable && pred(c)) stage_.push_back({key(c), pos});
  }
}

template <typename Ok>
size_t CandidatePool::TakeTop(size_t need, Ok&& ok) {
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
size_t CandidatePool::TakeRandom(size_t need, SelectionDraws& draws, Ok&& ok,
                                 bool positions_are_clients) {
  size_t taken = 0;
  size_t lo = 0;
  size_t hi = stage_.size();
  while (taken < need && lo < hi) {
    const size_t pick = draws.PickUniform(hi - lo, [&](size_t i) {
      const uint32_t pos = stage_[lo + i].pos;
      return positions_are_clients ? static_cast<ClientIndex>(pos) : pool_[pos].index;
    });
    std::swap(stage_[lo], stage_[lo + pick]);
    if (ok(stage_[lo].pos)) {
      ++lo;
      ++taken;
    } else {
      std::swap(stage_[lo], stage_[--hi]);
    }
  }
  return taken;
}

// Each draw is over the whole stage by prefix sums and binary search, and a draw that hits an
// entry already taken or rejected is redrawn, which gives exactly the conditional distribution
// over the remaining entries. After a run of such misses the stage is compacted. O(stage) to
// build plus O(log stage) per draw; no per-entry logarithms.
template <typename Ok>
size_t CandidatePool::TakeWeighted(size_t need, SelectionDraws& draws, Ok&& ok) {
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
    prefix_.resize(n);
    total = 0;
    for (size_t i = 0; i < n; ++i) {
      total += std::max(stage_[i].key, kMinSelectionWeight);
      prefix_[i] = total;
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
    const size_t i = draws.PickWeighted(absl::MakeConstSpan(prefix_),
                                        [this](size_t e) { return pool_[stage_[e].pos].index; });
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

}  // namespace fedsched::planner

#endif  // FEDSCHED_SERVER_PLANNER_CANDIDATE_POOL_H_
