#include "client/cache/importance_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace fedsched {

double RankWeight(int64_t rank) { return std::log(static_cast<double>(rank) + 10.0); }

double MeanRankWeight(int64_t batch_size) {
  if (batch_size < 1) batch_size = 1;
  double sum = 0.0;
  for (int64_t j = 0; j < batch_size; ++j) sum += RankWeight(j);
  return sum / static_cast<double>(batch_size);
}

double NextLs(double ls, bool have_previous, double previous_loss, double loss) {
  if (!have_previous) return std::min(kMaxLs, kLsInitFactor * loss);
  if (previous_loss <= 0.0) return ls;
  const double exponent = std::min(kMaxLsExponent, (loss - previous_loss) / previous_loss);
  return std::min(kMaxLs, ls * std::exp(exponent));
}

ImportanceModel::ImportanceModel(int64_t num_samples, double unseen_importance_scale,
                                 SamplingWeights weights)
    : n_(num_samples), unseen_scale_(unseen_importance_scale), weights_(weights) {
  unseen_importance_ = weights_ == SamplingWeights::kFedCaseReview
                           ? 1.0
                           : unseen_scale_ * MeanRankWeight(batch_size_);
  Reset();
}

std::pair<double, double> ImportanceModel::ImportanceRange() const {
  if (n_ == 0) return {0.0, 0.0};
  double lo = std::numeric_limits<double>::infinity();
  double hi = -lo;
  for (int64_t i = 0; i < n_; ++i) {
    const double w = Importance(i);
    lo = std::min(lo, w);
    hi = std::max(hi, w);
  }
  return {lo, hi};
}

void ImportanceModel::Reset() {
  importance_.assign(static_cast<size_t>(n_), 0.0f);
  frequency_.assign(static_cast<size_t>(n_), 0);
  ls_ = weights_ == SamplingWeights::kFedCaseReview ? kLsBeforeFirstLoss : 0.0;
  last_loss_ = 0.0;
  rounds_with_loss_ = 0;
}

void ImportanceModel::Restore(const v1::CacheState& state) {
  Reset();
  int64_t id = 0;
  for (int k = 0; k < state.id_deltas_size(); ++k) {
    id = (k == 0) ? state.id_deltas(0) : id + state.id_deltas(k);
    importance_[id] = state.importance(k);
    frequency_[id] = state.frequency(k);
  }
  ls_ = state.ls();
  last_loss_ = state.last_loss();
  rounds_with_loss_ = state.rounds_with_loss();
  if (state.batch_size() > 0) SetBatchSize(state.batch_size());
}

v1::CacheState ImportanceModel::Snapshot(int64_t max_entries) const {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n_; ++i) {
    if (frequency_[i] > 0 || importance_[i] > 0.0f) ids.push_back(static_cast<int32_t>(i));
  }
  if (static_cast<int64_t>(ids.size()) > max_entries) {
    // Keep the highest-ranked entries: they are the ones worth caching after a restart.
    const auto higher = [this](int32_t x, int32_t y) {
      if (importance_[x] != importance_[y]) return importance_[x] > importance_[y];
      if (frequency_[x] != frequency_[y]) return frequency_[x] > frequency_[y];
      return x < y;
    };
    std::nth_element(ids.begin(), ids.begin() + max_entries, ids.end(), higher);
    ids.resize(static_cast<size_t>(max_entries));
    std::sort(ids.begin(), ids.end());
  }
  v1::CacheState state;
  state.set_num_samples(n_);
  state.set_ls(ls_);
  state.set_last_loss(last_loss_);
  state.set_rounds_with_loss(rounds_with_loss_);
  state.set_batch_size(static_cast<int32_t>(batch_size_));
  state.mutable_id_deltas()->Reserve(static_cast<int>(ids.size()));
  state.mutable_importance()->Reserve(static_cast<int>(ids.size()));
  state.mutable_frequency()->Reserve(static_cast<int>(ids.size()));
  int64_t previous = 0;
  for (size_t k = 0; k < ids.size(); ++k) {
    state.add_id_deltas(k == 0 ? ids[k] : ids[k] - previous);
    previous = ids[k];
    state.add_importance(importance_[ids[k]]);
    state.add_frequency(frequency_[ids[k]]);
  }
  return state;
}

absl::Status ImportanceModel::CheckLosses(absl::Span<const int64_t> ids,
                                          absl::Span<const float> losses, int batch_size) const {
  if (ids.size() != losses.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReportLosses: ", ids.size(), " ids but ", losses.size(), " losses"));
  }
  if (batch_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("ReportLosses: batch_size ", batch_size));
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= n_) {
      return absl::OutOfRangeError(
          absl::StrCat("ReportLosses: sample id ", ids[i], " outside [0, ", n_, ")"));
    }
    if (!std::isfinite(losses[i]) || losses[i] < 0.0f) {
      return absl::InvalidArgumentError(
          absl::StrCat("ReportLosses: loss at position ", i, " is ", losses[i]));
    }
  }
  return absl::OkStatus();
}

bool ImportanceModel::SetBatchSize(int64_t batch_size) {
  if (batch_size == batch_size_) return false;
  batch_size_ = batch_size;
  if (weights_ == SamplingWeights::kFedCaseReview) return false;  // unseen stays 1.0
  unseen_importance_ = unseen_scale_ * MeanRankWeight(batch_size_);
  return true;
}

void ImportanceModel::ApplyLosses(absl::Span<const int64_t> ids, absl::Span<const float> losses,
                                  int batch_size, ChangeFn on_change) {
  for (size_t start = 0; start < ids.size(); start += static_cast<size_t>(batch_size)) {
    const size_t m = std::min(static_cast<size_t>(batch_size), ids.size() - start);
    rank_scratch_.resize(m);
    std::iota(rank_scratch_.begin(), rank_scratch_.end(), 0);
    const float* batch_losses = losses.data() + start;
    std::stable_sort(
        rank_scratch_.begin(), rank_scratch_.end(),
        [batch_losses](int32_t x, int32_t y) { return batch_losses[x] < batch_losses[y]; });
    // Ascending rank order: a sample repeated in the minibatch ends with its highest rank.
    for (size_t j = 0; j < m; ++j) {
      const int64_t id = ids[start + rank_scratch_[j]];
      const float old = importance_[id];
      importance_[id] = static_cast<float>(RankWeight(static_cast<int64_t>(j)));
      on_change(id, old);
    }
    // FedScale's moving loss over the task's steps (the first step's mean, then an EMA).
    double batch_sum = 0.0;
    for (size_t j = 0; j < m; ++j) batch_sum += losses[start + j];
    const double batch_mean = batch_sum / static_cast<double>(m);
    round_moving_loss_ = round_loss_count_ == 0 && start == 0
                             ? batch_mean
                             : (1.0 - kLossDecay) * round_moving_loss_ + kLossDecay * batch_mean;
  }
  for (float loss : losses) round_loss_sum_ += loss;
  round_loss_count_ += static_cast<int64_t>(losses.size());
}

void ImportanceModel::StartRound() {
  round_moving_loss_ = 0.0;
  round_loss_sum_ = 0.0;
  round_loss_count_ = 0;
}

void ImportanceModel::EndRound() {
  if (round_loss_count_ > 0) {
    const double loss = weights_ == SamplingWeights::kFedCaseReview
                            ? round_moving_loss_
                            : round_loss_sum_ / static_cast<double>(round_loss_count_);
    ls_ = NextLs(ls_, rounds_with_loss_ > 0, last_loss_, loss);
    last_loss_ = loss;
    ++rounds_with_loss_;
  }
  StartRound();
}

void ImportanceModel::CountRead(int64_t id) {
  if (frequency_[id] < std::numeric_limits<uint32_t>::max()) ++frequency_[id];
}

}  // namespace fedsched
