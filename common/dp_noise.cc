#include "common/dp_noise.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"

namespace fedsched {
namespace {

absl::Status CheckStddev(double stddev) {
  if (!(stddev >= 0.0) || !std::isfinite(stddev)) {
    return absl::InvalidArgumentError(
        absl::StrCat("noise standard deviation must be finite and >= 0, got ", stddev));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status AddGaussianNoise(absl::Span<float> values, double stddev, uint64_t seed) {
  if (absl::Status s = CheckStddev(stddev); !s.ok()) return s;
  if (stddev == 0.0) return absl::OkStatus();
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, stddev);
  // Summed in double, rounded once: the float32 sum keeps the noise's spread, not its bits.
  for (float& v : values) v = static_cast<float>(static_cast<double>(v) + normal(rng));
  return absl::OkStatus();
}

double UpdateL2Norm(const v1::Model& update) {
  double sum = 0;
  for (const v1::Tensor& t : update.tensors()) {
    for (float v : t.data()) sum += static_cast<double>(v) * v;
  }
  return std::sqrt(sum);
}

absl::StatusOr<bool> ClipAndNoiseUpdate(v1::Model* update, double clip_norm, double noise_stddev,
                                        uint64_t seed) {
  if (!(clip_norm > 0.0) || !std::isfinite(clip_norm)) {
    return absl::InvalidArgumentError(absl::StrCat("clip norm must be > 0, got ", clip_norm));
  }
  if (absl::Status s = CheckStddev(noise_stddev); !s.ok()) return s;
  const double norm = UpdateL2Norm(*update);
  if (!std::isfinite(norm)) {
    return absl::InvalidArgumentError("update holds a non-finite value; cannot clip it");
  }
  const bool unclipped = norm <= clip_norm;
  const float scale = unclipped ? 1.0f : static_cast<float>(clip_norm / norm);
  for (int i = 0; i < update->tensors_size(); ++i) {
    auto* data = update->mutable_tensors(i)->mutable_data();
    for (float& v : *data) v *= scale;
    absl::Status s = AddGaussianNoise(absl::MakeSpan(data->mutable_data(), data->size()),
                                      noise_stddev, seed + static_cast<uint64_t>(i));
    if (!s.ok()) return s;  // unreachable: the stddev was checked
  }
  return unclipped;
}

absl::StatusOr<double> NoiseUtilityReport(double utility, double stddev, uint64_t seed) {
  if (absl::Status s = CheckStddev(stddev); !s.ok()) return s;
  if (stddev == 0.0 || !std::isfinite(utility)) return utility;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, stddev);
  // Oort's code clamps at 1e-2; 0 is enough here, as the planner handles a zero utility.
  return std::max(0.0, utility + normal(rng));
}

}  // namespace fedsched
