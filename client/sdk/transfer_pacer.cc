#include "client/sdk/transfer_pacer.h"

#include <algorithm>

namespace fedsched {

double TransferPacer::SecondsFor(int64_t bytes, double kbps) {
  if (kbps <= 0 || bytes <= 0) return 0;
  return static_cast<double>(bytes) * 8.0 / 1000.0 / kbps;
}

absl::Duration TransferPacer::Account(int64_t bytes, absl::Time now) {
  total_bytes_ += std::max<int64_t>(0, bytes);
  if (kbps_ <= 0) return absl::ZeroDuration();
  const absl::Time allowed_at = start_ + absl::Seconds(SecondsFor(total_bytes_, kbps_));
  return std::max(absl::ZeroDuration(), allowed_at - now);
}

}  // namespace fedsched
