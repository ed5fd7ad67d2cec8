#include "server/planner/leaving_first.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "server/planner/selection_draws.h"

namespace fedsched::planner {
namespace {

// Moves `count` uniform draws without replacement from `from` (order destroyed) to `out`.
void DrawInto(std::vector<ClientIndex>* from, size_t count, std::mt19937_64& rng,
              std::vector<ClientIndex>* out) {
  for (size_t k = 0; k < count && !from->empty(); ++k) {
    const size_t i = UniformIndex(rng, from->size());
    out->push_back((*from)[i]);
    (*from)[i] = from->back();
    from->pop_back();
  }
}

}  // namespace

bool PredictedLeaving(const AvailabilityOracle* oracle, ClientIndex index,
                      double min_online_probability, double now_s, double window_s) {
  // REFL's two slots of length W: online through the first, not through the second.
  if (oracle == nullptr || !(window_s > 0)) return false;
  return oracle->ProbabilityOnline(index, now_s, now_s + window_s) >= min_online_probability &&
         oracle->ProbabilityOnline(index, now_s, now_s + 2 * window_s) < min_online_probability;
}

LeavingFirstCounts NarrowToLeavingFirst(const LeavingFirstOptions& options,
                                        absl::Span<const ClientIndex> candidates,
                                        const profile::ProfileBook& book,
                                        const AvailabilityOracle* oracle,
                                        double min_online_probability, int64_t round, double now_s,
                                        double window_s, size_t slots, std::mt19937_64& rng,
                                        std::vector<ClientIndex>* out) {
  LeavingFirstCounts counts;
  out->clear();
  absl::flat_hash_set<ClientIndex> seen;
  seen.reserve(candidates.size());
  std::vector<ClientIndex> eligible;
  eligible.reserve(candidates.size());
  for (ClientIndex index : candidates) {
    if (!book.state(index).busy && seen.insert(index).second) eligible.push_back(index);
  }
  counts.eligible = eligible.size();
  if (eligible.size() <= slots) {
    *out = std::move(eligible);
    return counts;
  }
  std::vector<ClientIndex> others;
  std::vector<ClientIndex> cooled;
  for (ClientIndex index : eligible) {
    const int64_t last = book.state(index).last_selected_round;
    if (last > 0 && round - last < options.cooldown_rounds) {
      cooled.push_back(index);
      continue;
    }
    if (PredictedLeaving(oracle, index, min_online_probability, now_s, window_s)) {
      out->push_back(index);
    } else {
      others.push_back(index);
    }
  }
  counts.leaving = out->size();
  counts.cooled = cooled.size();
  if (out->size() >= slots) return counts;
  DrawInto(&others, slots - out->size(), rng, out);
  DrawInto(&cooled, slots - out->size(), rng, out);
  return counts;
}

}  // namespace fedsched::planner
