// The random source of a round's selection: every random pick of the CandidatePool's Take*()
// steps and FedCaSe's top-ratio draw goes through a SelectionDraws, so that a test can script
// the picks (the golden tests replay the reference implementations' own draws,
// docs/ALGORITHMS.md §3 "Golden test" and §4). Production uses RngDraws over the planner's
// per-round mt19937_64.
#ifndef FEDSCHED_SERVER_PLANNER_SELECTION_DRAWS_H_
#define FEDSCHED_SERVER_PLANNER_SELECTION_DRAWS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "server/profile/profile_book.h"

namespace fedsched::planner {

// Uniform double in (0, 1) from the top 53 bits of one draw of `rng`.
inline double Uniform01(std::mt19937_64& rng) {
  return (static_cast<double>(rng() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

// Uniform integer in [0, n), n >= 1, from one draw of `rng` (multiply-shift; the bias is below
// 2^-53 for n < 2^11).
inline size_t UniformIndex(std::mt19937_64& rng, size_t n) {
  return static_cast<size_t>(
      (static_cast<unsigned __int128>(rng()) * static_cast<unsigned __int128>(n)) >> 64);
}

// Names the client of entry i of the entries a pick is made among.
using ClientOfEntry = absl::FunctionRef<profile::ClientIndex(size_t)>;

// One selection's source of random picks. Implementations must return an index in range.
class SelectionDraws {
 public:
  virtual ~SelectionDraws() = default;
  // A uniform pick among `n` >= 1 entries: an index in [0, n). `client_of(i)` names entry i's
  // client (for a scripted source; RngDraws ignores it).
  virtual size_t PickUniform(size_t n, ClientOfEntry client_of) = 0;
  // A weighted pick among prefix.size() >= 1 entries with p(i) ~ prefix[i] - prefix[i - 1]
  // (prefix ascending, prefix.back() > 0): an index in [0, prefix.size()). Entries may include
  // ones already taken; the caller redraws when one is hit.
  virtual size_t PickWeighted(absl::Span<const double> prefix, ClientOfEntry client_of) = 0;
  // A uniform choice among `n` >= 1 values that are not clients (FedCaSe's ratio draw).
  virtual size_t PickIndex(size_t n) = 0;
};

// Production draws: one draw of `rng` per pick (UniformIndex; Uniform01 x total located by
// binary search in the prefix sums).
class RngDraws final : public SelectionDraws {
 public:
  // `rng` is not owned and must outlive this object.
  explicit RngDraws(std::mt19937_64& rng) : rng_(rng) {}

  size_t PickUniform(size_t n, ClientOfEntry) override { return UniformIndex(rng_, n); }
  size_t PickWeighted(absl::Span<const double> prefix, ClientOfEntry) override {
    const double r = Uniform01(rng_) * prefix.back();
    const size_t i =
        static_cast<size_t>(std::upper_bound(prefix.begin(), prefix.end(), r) - prefix.begin());
    return std::min(i, prefix.size() - 1);
  }
  size_t PickIndex(size_t n) override { return UniformIndex(rng_, n); }

 private:
  std::mt19937_64& rng_;
};

}  // namespace fedsched::planner

#endif  // FEDSCHED_SERVER_PLANNER_SELECTION_DRAWS_H_
