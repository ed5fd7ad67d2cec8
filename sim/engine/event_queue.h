// The simulator's event queue: events ordered by virtual time, ties broken by insertion order
// (a sequence number), so that a run is a deterministic function of its inputs
// (docs/ARCHITECTURE.md "The round engine": the simulator drives the engine over virtual time).
// Processing events out of virtual-time order is a classic simulator fault: Push refuses an
// event earlier than the last popped one.
#ifndef FEDSCHED_SIM_ENGINE_EVENT_QUEUE_H_
#define FEDSCHED_SIM_ENGINE_EVENT_QUEUE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace fedsched::sim {

enum class EventKind : uint8_t {
  kAvailabilityChange = 0,  // a client's availability flips (one pending per client, lazily)
  kTaskComplete = 1,        // a participant's update arrives (download + compute + I/O + upload)
  kTaskFail = 2,            // a participant went offline before finishing
  kRoundDeadline = 3,       // a round's deadline (the engine closes or fails it)
  kRoundStart = 4,  // the start, the end of a re-plan backoff or a step deadline: an Advance
  kSecAggSend = 5,  // a device sends its next secure-aggregation message (a: task serial)
};

// One event. `client`, `a`, `b` are payload whose meaning depends on `kind` (the simulator's
// task serial, a round's deadline tag).
struct Event {
  double time_s = 0;  // virtual seconds
  uint64_t seq = 0;   // insertion order; breaks ties in time
  EventKind kind = EventKind::kRoundStart;
  int32_t client = -1;
  int64_t a = 0;
  int64_t b = 0;
};

// A binary min-heap on (time_s, seq). Not thread-safe.
class EventQueue {
 public:
  EventQueue() = default;
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;

  // Schedules an event at `time_s` (seconds of virtual time). Events at equal times pop in the
  // order they were pushed. Errors: INVALID_ARGUMENT if time_s is NaN or earlier than now()
  // (the time of the last popped event): the queue never goes back in time.
  [[nodiscard]] absl::Status Push(double time_s, EventKind kind, int32_t client = -1, int64_t a = 0,
                                  int64_t b = 0);
  // Removes and returns the earliest event and advances now() to its time.
  // Precondition: !empty().
  Event Pop();
  const Event& Top() const { return heap_.front(); }
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  // Virtual time of the last popped event (the start time before any Pop), seconds.
  double now() const { return now_; }
  void set_start_time(double t) { now_ = t; }
  // Events popped so far.
  uint64_t popped() const { return popped_; }
  void Reserve(size_t n) { heap_.reserve(n); }

 private:
  static bool Before(const Event& x, const Event& y) {
    return x.time_s < y.time_s || (x.time_s == y.time_s && x.seq < y.seq);
  }
  std::vector<Event> heap_;
  uint64_t next_seq_ = 0;
  uint64_t popped_ = 0;
  double now_ = 0;
};

}  // namespace fedsched::sim

#endif  // FEDSCHED_SIM_ENGINE_EVENT_QUEUE_H_
