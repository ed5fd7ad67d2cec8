// The simulator's event queue (docs/ARCHITECTURE.md "The round engine": virtual time).
#include "sim/engine/event_queue.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace fedsched::sim {

absl::Status EventQueue::Push(double time_s, EventKind kind, int32_t client, int64_t a, int64_t b) {
  if (std::isnan(time_s) || time_s < now_) {
    return absl::InvalidArgumentError(absl::StrCat("event at t=", time_s,
                                                   " s is before the current virtual time ", now_,
                                                   " s (kind ", static_cast<int>(kind), ")"));
  }
  heap_.push_back(Event{time_s, next_seq_++, kind, client, a, b});
  // Sift up.
  size_t i = heap_.size() - 1;
  Event e = heap_[i];
  while (i > 0) {
    const size_t parent = (i - 1) / 2;
    if (!Before(e, heap_[parent])) break;
    heap_[i] = heap_[parent];
    i = parent;
  }
  heap_[i] = e;
  return absl::OkStatus();
}

Event EventQueue::Pop() {
  Event top = heap_.front();
  Event last = heap_.back();
  heap_.pop_back();
  const size_t n = heap_.size();
  if (n > 0) {
    // Sift `last` down from the root.
    size_t i = 0;
    while (true) {
      size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && Before(heap_[child + 1], heap_[child])) ++child;
      if (!Before(heap_[child], last)) break;
      heap_[i] = heap_[child];
      i = child;
    }
    heap_[i] = last;
  }
  now_ = top.time_s;
  ++popped_;
  return top;
}

}  // namespace fedsched::sim
