#include "models/partition.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "models/rng.h"

namespace fedsched {

absl::StatusOr<std::vector<std::vector<int64_t>>> DirichletPartition(
    absl::Span<const uint8_t> labels, int num_clients, double alpha, int min_samples,
    uint64_t seed) {
  const int64_t n = static_cast<int64_t>(labels.size());
  if (num_clients <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("DirichletPartition: num_clients must be > 0, got %d", num_clients));
  }
  if (!(alpha > 0.0) || !std::isfinite(alpha)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("DirichletPartition: alpha must be finite and > 0, got %g", alpha));
  }
  if (min_samples < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("DirichletPartition: min_samples must be >= 0, got %d", min_samples));
  }
  if (int64_t{min_samples} * num_clients > n) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "DirichletPartition: min_samples (%d) * num_clients (%d) exceeds the %d samples",
        min_samples, num_clients, n));
  }

  // Shuffle each label's samples once; each attempt only redraws how many of them each client
  // gets, so retries cost O(labels * clients), not O(N).
  std::array<std::vector<int64_t>, 256> by_label;
  for (int64_t i = 0; i < n; ++i) by_label[labels[i]].push_back(i);
  Rng rng(seed);
  std::vector<std::vector<int64_t>*> groups;
  for (auto& group : by_label) {
    if (group.empty()) continue;
    rng.Shuffle(absl::MakeSpan(group));
    groups.push_back(&group);
  }

  const size_t k = static_cast<size_t>(num_clients);
  std::vector<std::vector<int64_t>> counts(groups.size(), std::vector<int64_t>(k));
  std::vector<double> log_p(k);
  std::vector<int64_t> per_client(k);
  for (int attempt = 0; attempt < kDirichletMaxAttempts; ++attempt) {
    std::fill(per_client.begin(), per_client.end(), 0);
    for (size_t g = 0; g < groups.size(); ++g) {
      // Dir(alpha) = normalised Gamma(alpha, 1) draws, normalised in log space.
      for (double& lp : log_p) lp = rng.LogGamma(alpha);
      const double max_lp = *std::max_element(log_p.begin(), log_p.end());
      double total = 0.0;
      for (double& lp : log_p) total += (lp = std::exp(lp - max_lp));
      // Round the cumulative proportions, so the counts sum to the group size exactly.
      const int64_t size = static_cast<int64_t>(groups[g]->size());
      double cumulative = 0.0;
      int64_t prev_cut = 0;
      for (size_t c = 0; c < k; ++c) {
        cumulative += log_p[c];
        int64_t cut = c + 1 == k ? size : std::llround(size * (cumulative / total));
        cut = std::clamp(cut, prev_cut, size);
        counts[g][c] = cut - prev_cut;
        per_client[c] += cut - prev_cut;
        prev_cut = cut;
      }
    }
    if (*std::min_element(per_client.begin(), per_client.end()) < min_samples) continue;

    std::vector<std::vector<int64_t>> parts(k);
    for (size_t c = 0; c < k; ++c) parts[c].reserve(per_client[c]);
    for (size_t g = 0; g < groups.size(); ++g) {
      auto it = groups[g]->begin();
      for (size_t c = 0; c < k; ++c) {
        parts[c].insert(parts[c].end(), it, it + counts[g][c]);
        it += counts[g][c];
      }
    }
    for (auto& part : parts) std::sort(part.begin(), part.end());
    return parts;
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "DirichletPartition: no Dirichlet(alpha=%g) draw in %d attempts gave all %d clients >= %d "
      "of the %d samples; raise alpha or lower min_samples",
      alpha, kDirichletMaxAttempts, num_clients, min_samples, n));
}

absl::StatusOr<ImageDataset> EvalShare(const ImageDataset& data, int index, int count) {
  if (count <= 0 || index < 0 || index >= count || data.size < count) {
    return absl::InvalidArgumentError(absl::StrCat("eval share ", index, " of ", count,
                                                   " of a data set of ", data.size,
                                                   " images: need 0 <= index < count <= images"));
  }
  const int64_t share = data.size / count;
  const int64_t pixels = data.pixels_per_image();
  ImageDataset out;
  out.size = share;
  out.rows = data.rows;
  out.cols = data.cols;
  out.pixels.assign(data.pixels.begin() + index * share * pixels,
                    data.pixels.begin() + (index + 1) * share * pixels);
  out.labels.assign(data.labels.begin() + index * share, data.labels.begin() + (index + 1) * share);
  return out;
}

}  // namespace fedsched
