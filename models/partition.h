// Splitting a labelled data set across simulated clients with Dirichlet label skew.
#ifndef FEDSCHED_CLIENT_MODELS_PARTITION_H_
#define FEDSCHED_CLIENT_MODELS_PARTITION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "models/idx.h"

namespace fedsched {

// Most rounds of proportions DirichletPartition draws before giving up on `min_samples`.
inline constexpr int kDirichletMaxAttempts = 10000;

// Label-skewed partition of a data set over `num_clients` clients (Hsu et al. 2019, "Measuring the
// Effects of Non-Identical Data Distribution for Federated Visual Classification"; as in Flower's
// FedAvgM baseline): for every label value, the samples carrying it are shuffled and split among
// the clients in proportions drawn from a symmetric Dirichlet(alpha) over clients. If some client
// ends up with fewer than `min_samples` samples, all proportions are drawn again (up to
// kDirichletMaxAttempts times).
// Small alpha (e.g. 0.1) gives each client few labels; large alpha (e.g. 100) approaches an IID
// split.
//
// `labels`: [N] label of each sample (any byte value is a label of its own).
// Returns [num_clients] lists of sample indices into `labels`, each sorted ascending; every index
// in [0, N) appears in exactly one list. The result depends only on (labels, num_clients, alpha,
// min_samples, seed): a fixed seed gives the same partition on every run (own gamma sampler over
// std::mt19937_64, so no dependence on the standard library's distributions).
// Errors:
//   INVALID_ARGUMENT   num_clients <= 0, alpha <= 0 or not finite, min_samples < 0, or
//                      min_samples * num_clients > N;
//   FAILED_PRECONDITION no draw in kDirichletMaxAttempts gave every client >= min_samples
//                      (alpha too small for this min_samples; lower it or raise alpha).
absl::StatusOr<std::vector<std::vector<int64_t>>> DirichletPartition(
    absl::Span<const uint8_t> labels, int num_clients, double alpha, int min_samples,
    uint64_t seed);

// A device's held-out eval split for client-side evaluation (docs/ARCHITECTURE.md "Client-side
// evaluation"): share `index` of `count` contiguous equal shares of `data`, i.e. images
// [index * s, (index + 1) * s) with s = data.size / count (the remainder is unused), the split
// examples/pytorch_fmnist.py gives its clients of the t10k test set.
// Errors: INVALID_ARGUMENT when count <= 0, index is outside [0, count), or `data` has fewer
// than `count` images.
absl::StatusOr<ImageDataset> EvalShare(const ImageDataset& data, int index, int count);

}  // namespace fedsched

#endif  // FEDSCHED_CLIENT_MODELS_PARTITION_H_
