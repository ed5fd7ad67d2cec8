#include "client/cache/round_sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "absl/container/flat_hash_map.h"

namespace fedsched {
namespace {

// Portable draws from the raw 64-bit engine output (the standard distributions are
// implementation-defined, so the same seed would give different plans across standard libraries).
double Uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

uint64_t Below(std::mt19937_64& rng, uint64_t n) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do {
    x = rng();
  } while (x >= limit);
  return x % n;
}

}  // namespace

RoundSampler::RoundSampler(int64_t num_samples)
    : n_(num_samples),
      trained_weights_(num_samples),
      untrained_(static_cast<size_t>(num_samples)),
      untrained_pos_(static_cast<size_t>(num_samples)) {
  std::iota(untrained_.begin(), untrained_.end(), 0);
  std::iota(untrained_pos_.begin(), untrained_pos_.end(), 0);
}

void RoundSampler::Rebuild(const ImportanceModel& model) {
  std::vector<double> weights(static_cast<size_t>(n_), 0.0);
  untrained_.clear();
  for (int64_t i = 0; i < n_; ++i) {
    weights[i] = model.TrainedImportance(i);
    if (model.Trained(i)) {
      untrained_pos_[i] = -1;
    } else {
      untrained_pos_[i] = static_cast<int32_t>(untrained_.size());
      untrained_.push_back(static_cast<int32_t>(i));
    }
  }
  trained_weights_.Assign(weights);
}

void RoundSampler::UpdateWeight(int64_t id, float old_importance, float new_importance) {
  if (old_importance <= 0.0f) {
    // First training of this sample: it leaves the untrained pool.
    const int32_t pos = untrained_pos_[id];
    const int32_t last = untrained_.back();
    untrained_[pos] = last;
    untrained_pos_[last] = pos;
    untrained_.pop_back();
    untrained_pos_[id] = -1;
    trained_weights_.Add(id, new_importance);
  } else if (old_importance != new_importance) {
    trained_weights_.Add(id,
                         static_cast<double>(new_importance) - static_cast<double>(old_importance));
  }
}

std::vector<int64_t> RoundSampler::Sample(CacheDraw draw, int64_t slots, int32_t replication,
                                          const ImportanceModel& model,
                                          absl::FunctionRef<bool(int64_t)> is_cached,
                                          std::mt19937_64& rng) {
  std::vector<int64_t> ids;
  ids.reserve(static_cast<size_t>(slots));
  if (draw == CacheDraw::kImportance) {
    const Normalisation norm = NormalisationOf(model);
    while (static_cast<int64_t>(ids.size()) < slots) {
      const int64_t id = DrawImportance(model, rng, norm);
      const int64_t remaining = slots - static_cast<int64_t>(ids.size());
      const int64_t copies = is_cached(id) ? std::min<int64_t>(replication, remaining) : 1;
      ids.insert(ids.end(), static_cast<size_t>(copies), id);
    }
    for (size_t i = ids.size(); i > 1; --i) std::swap(ids[i - 1], ids[Below(rng, i)]);
  } else {
    if (perm_.size() != static_cast<size_t>(n_)) {
      perm_.resize(static_cast<size_t>(n_));
      std::iota(perm_.begin(), perm_.end(), 0);
    }
    perm_next_ = 0;
    for (int64_t k = 0; k < slots; ++k) ids.push_back(DrawUniformWithoutReplacement(rng));
  }
  return ids;
}

double AdaptiveReplication(int64_t hits, int64_t slots, int batch_size) {
  if (hits <= 0) return 1.0;  // the review code's rep_factor default
  const int64_t m = slots / hits + 1;
  if (m <= 3) return static_cast<double>(m);
  if (static_cast<double>(hits) > 0.6 * batch_size) {
    return static_cast<double>(std::max<int64_t>(3, (m + 1) / 2));
  }
  return std::max(3.0, 0.2 * batch_size);
}

int64_t ReplicatedHits(int64_t hits, double r) {
  if (r != std::floor(r)) return hits * static_cast<int64_t>(r - 0.5) + hits / 2;
  return hits * static_cast<int64_t>(r);
}

void PadsSort(std::vector<int64_t>* ids) {
  absl::flat_hash_map<int64_t, int64_t> count;
  for (int64_t id : *ids) ++count[id];
  std::sort(ids->begin(), ids->end(), [&count](int64_t a, int64_t b) {
    const int64_t ca = count[a];
    const int64_t cb = count[b];
    return ca != cb ? ca > cb : a < b;
  });
}

std::vector<int64_t> RoundSampler::SampleAdaptive(int64_t slots, int batch_size,
                                                  const ImportanceModel& model,
                                                  absl::FunctionRef<bool(int64_t)> is_cached,
                                                  std::mt19937_64& rng) {
  const bool reorder = ++adaptive_calls_ % 3 == 0;
  const Normalisation norm = NormalisationOf(model);
  std::vector<int64_t> drawn(static_cast<size_t>(reorder ? std::max(n_, slots) : slots));
  for (int64_t& id : drawn) id = DrawImportance(model, rng, norm);
  if (reorder) {
    PadsSort(&drawn);
    drawn.resize(static_cast<size_t>(slots));
  }
  std::vector<int64_t> hits;
  std::vector<int64_t> misses;
  for (int64_t id : drawn) (is_cached(id) ? hits : misses).push_back(id);
  const double r = AdaptiveReplication(static_cast<int64_t>(hits.size()), slots, batch_size);
  last_replication_ = r;
  const auto h = static_cast<int64_t>(hits.size());
  std::vector<int64_t> ids;
  ids.reserve(static_cast<size_t>(std::max(slots, ReplicatedHits(h, r))));
  const auto whole = static_cast<int64_t>(r != std::floor(r) ? r - 0.5 : r);
  for (int64_t k = 0; k < whole; ++k) ids.insert(ids.end(), hits.begin(), hits.end());
  if (r != std::floor(r)) ids.insert(ids.end(), hits.begin(), hits.begin() + h / 2);
  auto shuffle = [&rng](std::vector<int64_t>::iterator first, std::vector<int64_t>::iterator last) {
    for (auto n = last - first; n > 1; --n) std::swap(first[n - 1], first[Below(rng, n)]);
  };
  shuffle(ids.begin(), ids.end());
  shuffle(misses.begin(), misses.end());
  // misses[:slots - copies] in Python: a negative count drops that many from the end.
  const auto m = static_cast<int64_t>(misses.size());
  const int64_t want = slots - static_cast<int64_t>(ids.size());
  const int64_t take = want >= 0 ? std::min(want, m) : std::max<int64_t>(0, m + want);
  ids.insert(ids.end(), misses.begin(), misses.begin() + take);
  ids.resize(static_cast<size_t>(slots));
  shuffle(ids.begin(), ids.end());
  return ids;
}

double SamplingWeight(const ImportanceModel& model, const Normalisation& norm, int64_t id) {
  const double w = model.Importance(id);
  return w + std::clamp((w - norm.min) * norm.inv_range, 0.0, 1.0) + model.ls();
}

Normalisation RoundSampler::NormalisationOf(const ImportanceModel& model) {
  if (model.sampling_weights() != SamplingWeights::kFedCaseReview) return {};
  const auto [lo, hi] = model.ImportanceRange();
  // The review code divides by (max - min) and keeps the raw weights when that raises.
  return {lo, hi > lo ? 1.0 / (hi - lo) : 0.0};
}

int64_t RoundSampler::DrawImportance(const ImportanceModel& model, std::mt19937_64& rng,
                                     Normalisation norm) {
  const bool normalised = norm.inv_range > 0.0;
  const double trained = trained_weights_.Total();
  const double unseen_w = model.UnseenImportance();
  const double unseen = unseen_w * static_cast<double>(untrained_.size());
  const double ls = model.ls();
  // The proposal's per-sample constant: the normalised term is in [0, 1], so w + ls + 1 bounds
  // every weight from above.
  const double flat = normalised ? ls + 1.0 : ls;
  const double smoothing = flat * static_cast<double>(n_);
  const double total = trained + unseen + smoothing;
  if (!(total > 0.0) || !std::isfinite(total)) return static_cast<int64_t>(Below(rng, n_));
  for (int attempt = 0; attempt < 64; ++attempt) {
    const double u = Uniform01(rng) * total;
    int64_t id;
    if (u < trained) {
      id = trained_weights_.Find(u);
      if (!model.Trained(id)) continue;  // floating-point drift landed on an untrained id
    } else if (u < trained + unseen) {
      const auto k = static_cast<size_t>((u - trained) / unseen_w);
      id = untrained_[std::min(k, untrained_.size() - 1)];
    } else {
      id = std::min(static_cast<int64_t>((u - trained - unseen) / flat), n_ - 1);
    }
    if (!normalised) return id;
    const double w = model.Importance(id);
    if (Uniform01(rng) * (w + flat) < SamplingWeight(model, norm, id)) return id;
  }
  return static_cast<int64_t>(Below(rng, n_));
}

int64_t RoundSampler::DrawUniformWithoutReplacement(std::mt19937_64& rng) {
  // Partial Fisher-Yates over a persistent permutation: O(1) per draw, distinct ids within one
  // pass over the N samples; a new pass starts when a round needs more than N.
  if (perm_next_ >= n_) perm_next_ = 0;
  const int64_t j = perm_next_ + static_cast<int64_t>(Below(rng, n_ - perm_next_));
  std::swap(perm_[perm_next_], perm_[j]);
  return perm_[perm_next_++];
}

}  // namespace fedsched
