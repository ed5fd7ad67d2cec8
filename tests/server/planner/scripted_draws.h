// A SelectionDraws that replays recorded picks (the golden tests feed it the clients a reference
// implementation's own random draws picked, in order), so that a selection can be compared with
// the reference's exactly (docs/ALGORITHMS.md §3 and §4, "Golden test").
#ifndef FEDSCHED_TESTS_SERVER_PLANNER_SCRIPTED_DRAWS_H_
#define FEDSCHED_TESTS_SERVER_PLANNER_SCRIPTED_DRAWS_H_

#include <cstddef>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "server/planner/planner_options.h"
#include "server/planner/policy.h"
#include "server/planner/round_plan.h"
#include "server/planner/selection_draws.h"
#include "server/planner/workload.h"
#include "server/profile/profile_book.h"
#include "server/profile/round_time.h"

namespace fedsched::planner {

// Each PickUniform / PickWeighted returns the entry of the next scripted client; each PickIndex
// the next scripted index. A scripted client not among the offered entries (or an exhausted
// script) is an error, noted in errors() (the pick then falls back to entry 0).
class ScriptedDraws final : public SelectionDraws {
 public:
  // Appends clients to pick, in order.
  void AddClients(const std::vector<int>& clients) {
    clients_.insert(clients_.end(), clients.begin(), clients.end());
  }
  // Appends an index for the next PickIndex.
  void AddIndex(size_t index) { indices_.push_back(index); }

  size_t PickUniform(size_t n, ClientOfEntry client_of) override {
    return Find(n, client_of, [](size_t) { return true; });
  }
  size_t PickWeighted(absl::Span<const double> prefix, ClientOfEntry client_of) override {
    return Find(prefix.size(), client_of,
                [&](size_t i) { return prefix[i] > (i == 0 ? 0.0 : prefix[i - 1]); });
  }
  size_t PickIndex(size_t n) override {
    if (indices_.empty() || indices_.front() >= n) {
      errors_.push_back(absl::StrCat("no scripted index below ", n));
      return 0;
    }
    const size_t i = indices_.front();
    indices_.pop_front();
    return i;
  }

  // Scripted picks not yet consumed.
  size_t clients_left() const { return clients_.size(); }
  size_t indices_left() const { return indices_.size(); }
  // One message per pick that could not follow the script.
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  template <typename Drawable>
  size_t Find(size_t n, ClientOfEntry client_of, Drawable drawable) {
    if (clients_.empty()) {
      errors_.push_back(absl::StrCat("script exhausted at a pick among ", n, " entries"));
      return 0;
    }
    const int want = clients_.front();
    clients_.pop_front();
    for (size_t i = 0; i < n; ++i) {
      if (static_cast<int>(client_of(i)) == want && drawable(i)) return i;
    }
    errors_.push_back(absl::StrCat("client ", want, " is not among the ", n, " entries offered"));
    return 0;
  }

  std::deque<int> clients_;
  std::deque<size_t> indices_;
  std::vector<std::string> errors_;
};

// Calls `select(context)` with the RoundContext of the first attempt of round `round` (>= 1)
// over `candidates` of `book`, `slots` tasks, picks from `draws` (the golden tests drive the
// policies directly with it).
template <typename Select>
void WithGoldenRound(const PlannerOptions& options, const profile::ProfileBook& book,
                     absl::Span<const profile::ClientIndex> candidates, size_t slots, int64_t round,
                     SelectionDraws& draws, Select&& select) {
  const PlanRequest request{.round = round, .now_s = 0, .candidates = candidates};
  const profile::RoundTimePredictor predictor =
      *profile::RoundTimePredictor::Create(options.predictor);
  const fit::MemoryPredictor memory = *fit::MemoryPredictor::Create(options.fit.predictor);
  const CandidateEvaluator evaluator(options, book, predictor, memory, request);
  std::mt19937_64 rng(1);
  const RoundContext context{.request = request,
                             .options = options,
                             .book = book,
                             .evaluator = evaluator,
                             .slots = slots,
                             .attempt = 1,
                             .rounds_planned = round - 1,
                             .rng = rng,
                             .draws = draws};
  select(context);
}

}  // namespace fedsched::planner

#endif  // FEDSCHED_TESTS_SERVER_PLANNER_SCRIPTED_DRAWS_H_
