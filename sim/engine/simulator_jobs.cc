// The simulator's side of a fleet shared by several jobs (docs/guides/JOBS.md "Simulating jobs";
// sim/engine/job_simulation.h drives one Simulator per job): the stepwise driving that replaces
// Run, the device occupancy across jobs and the job's planning gate. Split from simulator.cc
// along this seam; the class is declared in simulator.h. Without a JobSeat every hook here is a
// no-op, so a run of one config is exactly as before.
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "sim/engine/simulator.h"

namespace fedsched::sim {

absl::Status Simulator::Begin(RoundSink* sink) {
  sink_ = sink;
  return CheckCanStart();
}

std::optional<double> Simulator::NextEventS() const {
  if (queue_.empty()) return std::nullopt;
  return queue_.Top().time_s;
}

absl::Status Simulator::HandleEventsAt(double now) {
  bool advance = false;  // the caller advances every job at every instant anyway
  while (!stop_ && !queue_.empty() && queue_.Top().time_s == now) {
    const Event e = queue_.Pop();
    FEDSCHED_RETURN_IF_ERROR(HandleEvent(e, &advance));
  }
  return absl::OkStatus();
}

absl::Status Simulator::AdvanceAt(double now) {
  if (stop_) return absl::OkStatus();
  FEDSCHED_RETURN_IF_ERROR(Step(now));
  NoteWaiting(now);
  return absl::OkStatus();
}

void Simulator::Halt(double now, std::string reason) {
  if (stop_) return;
  summary_.virtual_s = now - t0_;
  summary_.stop_reason = std::move(reason);
  stop_ = true;
}

RunSummary Simulator::summary() const {
  RunSummary s = summary_;
  s.events = queue_.popped();
  return s;
}

absl::Status Simulator::NoteTaskStart(int32_t client) {
  if (!parts_.job) return absl::OkStatus();
  return parts_.job->occupancy->Begin(client, parts_.job->job);
}

void Simulator::NoteTaskEnd(int32_t client) {
  if (parts_.job) parts_.job->occupancy->End(client, parts_.job->job);
}

bool Simulator::Free(round::ClientIndex index) const {
  return !parts_.job || !parts_.job->occupancy->BusyElsewhere(client_of_[index], parts_.job->job);
}

void Simulator::SettleGate(double now) {
  if (!parts_.job) return;
  round::ReportToGate(*engine_, now, parts_.job->gate, &describe_pacer_, &in_flight_);
}

}  // namespace fedsched::sim
