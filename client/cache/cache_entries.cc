#include "client/cache/cache_entries.h"

#include <utility>

namespace fedsched {

CacheEntries::CacheEntries(int64_t num_samples) : slot_(static_cast<size_t>(num_samples), -1) {}

std::string_view CacheEntries::Insert(int64_t id, std::string data, int64_t tick,
                                      const EvictionKey& key) {
  int32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<int32_t>(entries_.size());
    entries_.emplace_back();
  }
  Entry& e = entries_[slot];
  e.id = id;
  e.last_tick = tick;
  e.key = key;
  e.data = std::move(data);
  bytes_ += static_cast<int64_t>(e.data.size());
  slot_[id] = slot;
  heap_.push_back(slot);
  e.heap_pos = static_cast<int32_t>(heap_.size()) - 1;
  SiftUp(e.heap_pos);
  return std::string_view(entries_[slot].data);
}

std::string_view CacheEntries::Touch(int64_t id, int64_t tick, const EvictionKey& key) {
  const int32_t slot = slot_[id];
  Entry& e = entries_[slot];
  e.last_tick = tick;
  e.key = key;
  HeapFix(slot);
  return std::string_view(entries_[slot].data);
}

void CacheEntries::Rekey(int64_t id, const EvictionKey& key) {
  const int32_t slot = slot_[id];
  entries_[slot].key = key;
  HeapFix(slot);
}

void CacheEntries::RekeyAll(absl::FunctionRef<EvictionKey(int64_t id, int64_t last_tick)> key_of) {
  for (int32_t slot : heap_) {
    entries_[slot].key = key_of(entries_[slot].id, entries_[slot].last_tick);
  }
  for (int32_t i = 0; i < static_cast<int32_t>(heap_.size()); ++i) entries_[heap_[i]].heap_pos = i;
  for (int32_t i = static_cast<int32_t>(heap_.size()) / 2 - 1; i >= 0; --i) SiftDown(i);
}

void CacheEntries::EvictMin() {
  const int32_t slot = heap_[0];
  HeapSwap(0, static_cast<int32_t>(heap_.size()) - 1);
  heap_.pop_back();
  if (!heap_.empty()) SiftDown(0);
  Entry& e = entries_[slot];
  slot_[e.id] = -1;
  bytes_ -= static_cast<int64_t>(e.data.size());
  if (e.data.capacity() > recycled_.capacity()) std::swap(recycled_, e.data);
  e.data.clear();
  e.id = -1;
  e.heap_pos = -1;
  free_slots_.push_back(slot);
}

std::string CacheEntries::TakeRecycledBuffer() {
  std::string buffer = std::move(recycled_);
  recycled_ = std::string();
  return buffer;
}

// Indexed binary min-heap over entry slots (O(log C), no allocation beyond its slot array).

void CacheEntries::HeapSwap(int32_t i, int32_t j) {
  std::swap(heap_[i], heap_[j]);
  entries_[heap_[i]].heap_pos = i;
  entries_[heap_[j]].heap_pos = j;
}

void CacheEntries::SiftUp(int32_t pos) {
  while (pos > 0) {
    const int32_t parent = (pos - 1) / 2;
    if (!Less(pos, parent)) break;
    HeapSwap(pos, parent);
    pos = parent;
  }
}

void CacheEntries::SiftDown(int32_t pos) {
  const auto size = static_cast<int32_t>(heap_.size());
  for (;;) {
    const int32_t left = 2 * pos + 1;
    if (left >= size) break;
    int32_t child = left;
    if (left + 1 < size && Less(left + 1, left)) child = left + 1;
    if (!Less(child, pos)) break;
    HeapSwap(pos, child);
    pos = child;
  }
}

void CacheEntries::HeapFix(int32_t slot) {
  SiftUp(entries_[slot].heap_pos);
  SiftDown(entries_[slot].heap_pos);
}

}  // namespace fedsched
