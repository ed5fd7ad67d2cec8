// The simulator's side of the availability trace (docs/ALGORITHMS.md §7.3): the online list,
// each client's next availability change as a lazily scheduled event, the check that a round can
// ever start, and a device going offline. Split from simulator.cc along this seam; the class is
// declared in simulator.h.
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "sim/engine/simulator.h"

namespace fedsched::sim {

absl::Status Simulator::SetOnline(int32_t c, bool online, double now) {
  const bool is_online = online_pos_[c] >= 0;
  if (online == is_online) return absl::OkStatus();
  if (const int64_t index = index_of_[c]; index >= 0) {
    const size_t word = static_cast<size_t>(index) / 64;
    if (word >= online_bits_.size()) online_bits_.resize(word + 1, 0);
    const uint64_t bit = uint64_t{1} << (static_cast<size_t>(index) % 64);
    online_bits_[word] = online ? online_bits_[word] | bit : online_bits_[word] & ~bit;
  }
  if (online) {
    online_pos_[c] = static_cast<int32_t>(online_.size());
    online_.push_back(c);
  } else {
    const int32_t pos = online_pos_[c];
    const int32_t last = online_.back();
    online_[pos] = last;
    online_pos_[last] = pos;
    online_.pop_back();
    online_pos_[c] = -1;
  }
  if (learned_ == nullptr) return absl::OkStatus();
  // The server sees the device check in or lose liveness now; the trace's future stays unread.
  const auto index = static_cast<round::ClientIndex>(index_of_[c]);
  return online ? learned_->ObserveOnline(index, now) : learned_->ObserveOffline(index, now);
}

absl::StatusOr<const planner::AvailabilityOracle*> Simulator::MakeOracle() {
  switch (config_.availability_forecast()) {
    case v1::AVAILABILITY_FORECAST_UNSPECIFIED:
    case v1::AVAILABILITY_FORECAST_TRACE:
      oracle_ = std::make_unique<TraceAvailabilityOracle>(parts_.availability, &client_of_);
      return oracle_.get();
    case v1::AVAILABILITY_FORECAST_LEARNED: {
      FEDSCHED_ASSIGN_OR_RETURN(forecast::AvailabilityForecast f,
                                forecast::AvailabilityForecast::Create({}));
      learned_ = std::make_unique<forecast::AvailabilityForecast>(std::move(f));
      return learned_.get();
    }
    case v1::AVAILABILITY_FORECAST_NONE:
      return nullptr;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "simulator: availability_forecast ", static_cast<int>(config_.availability_forecast()),
          " is unknown; use TRACE, LEARNED or NONE"));
  }
}

absl::Status Simulator::ScheduleAvailability(int32_t c, double now) {
  double next = parts_.availability->NextChange(c, now);
  if (next <= now)
    next = parts_.availability->NextChange(c, std::nextafter(now, AvailabilityTrace::kNever));
  if (next == AvailabilityTrace::kNever) return absl::OkStatus();
  return queue_.Push(next, EventKind::kAvailabilityChange, c);
}

absl::Status Simulator::CheckCanStart() const {
  const AvailabilityTrace& trace = *parts_.availability;
  std::vector<int64_t> per_row(static_cast<size_t>(trace.size()), 0);
  for (int32_t c : client_of_) ++per_row[static_cast<size_t>(trace.RowOf(c))];
  const AvailabilityTrace::Peak peak = trace.PeakOnline(per_row);
  const int64_t needed = config_.server().min_online_clients();
  if (peak.clients >= needed) return absl::OkStatus();
  const std::string registered = absl::StrCat(client_of_.size(), " clients with data");
  if (peak.clients == 0) {
    return absl::FailedPreconditionError(absl::StrCat("simulator: none of the ", registered,
                                                      " is ever online in the availability "
                                                      "trace (",
                                                      trace.description(),
                                                      "): no round can ever start"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "simulator: server.min_online_clients is ", needed, " but ",
      peak.exact ? absl::StrCat("at most ", peak.clients, " of the ", registered,
                                " are online at once over the trace's whole period (",
                                peak.period_s, " s)")
                 : absl::StrCat("only ", peak.clients, " of the ", registered, " are ever online"),
      " in ", trace.description(),
      ": no round can ever start (lower min_online_clients and "
      "clients_per_round, or use more clients)"));
}

absl::Status Simulator::OnAvailabilityChange(int32_t c, double now) {
  const bool online = parts_.availability->IsAvailable(c, now);
  FEDSCHED_RETURN_IF_ERROR(SetOnline(c, online, now));
  FEDSCHED_RETURN_IF_ERROR(ScheduleAvailability(c, now));
  if (online) return absl::OkStatus();
  const auto index = static_cast<round::ClientIndex>(index_of_[c]);
  if (const round::Task* task = engine_->TaskOf(index); task != nullptr) {
    return FailIfInFlight(index, task->task_id, now);
  }
  return absl::OkStatus();
}

}  // namespace fedsched::sim
