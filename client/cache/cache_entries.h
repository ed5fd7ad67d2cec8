// The RAM side of the on-device sample cache: the cached samples' bytes, indexed by sample id and
// ordered for eviction by an indexed binary min-heap of caller-computed keys (the importance-aware
// cache of FedCaSe, SoCC 2024, and its LRU / LFU baselines; docs/ALGORITHMS.md §4). What a key
// means (the policy) and when to admit or evict is the caller's (SampleCache's) business.
//
//   CacheEntries entries(store.NumSamples());
//   entries.Insert(id, std::move(bytes), tick, EvictionKey{importance, frequency, tick});
//   while (over_budget) entries.EvictMin();
//
// Internal to client/cache; public so that it can be tested on its own.
#ifndef FEDSCHED_CLIENT_CACHE_CACHE_ENTRIES_H_
#define FEDSCHED_CLIENT_CACHE_CACHE_ENTRIES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "client/cache/eviction_key.h"

namespace fedsched {

// The cached samples of a store of N samples: at most one entry per id in [0, N), each with its
// encoded bytes, the tick of its last use and its eviction key. Does not enforce a budget.
//
// Cost: Insert, Touch, Rekey and EvictMin are O(log C) for C entries; RekeyAll is O(C). Memory:
// 4 bytes per sample plus about 64 bytes per entry slot and the cached bytes; a slot and (the
// largest) evicted buffer are reused, so a full cache allocates nothing per admission.
// Thread-safety: not thread-safe; not copyable.
class CacheEntries {
 public:
  // No entries, for ids in [0, num_samples), num_samples in [0, 2^31 - 1].
  explicit CacheEntries(int64_t num_samples);
  CacheEntries(const CacheEntries&) = delete;
  CacheEntries& operator=(const CacheEntries&) = delete;

  // Whether `id` (in [0, N)) is cached.
  bool Contains(int64_t id) const { return slot_[id] >= 0; }
  // Number of entries and the sum of their sizes in bytes.
  int64_t size() const { return static_cast<int64_t>(heap_.size()); }
  int64_t bytes() const { return bytes_; }
  bool empty() const { return heap_.empty(); }

  // Adds `id` (not cached) with `data`, last used at `tick`, keyed `key`; returns a view of its
  // bytes, valid until the entry is evicted.
  std::string_view Insert(int64_t id, std::string data, int64_t tick, const EvictionKey& key);

  // A use of the cached `id`: sets its last tick to `tick` and its key to `key`; returns a view
  // of its bytes, valid until the entry is evicted.
  std::string_view Touch(int64_t id, int64_t tick, const EvictionKey& key);

  // Replaces the key of the cached `id` (its last tick is kept).
  void Rekey(int64_t id, const EvictionKey& key);

  // Recomputes every key as key_of(id, last tick) and re-heapifies: after a change of what the
  // keys mean (the policy, or the importance of every untrained sample).
  void RekeyAll(absl::FunctionRef<EvictionKey(int64_t id, int64_t last_tick)> key_of);

  // The last tick of the cached `id`.
  int64_t LastTick(int64_t id) const { return entries_[slot_[id]].last_tick; }

  // The entry with the smallest key (ties: whichever the heap holds at its root). Requires
  // !empty().
  int64_t MinId() const { return entries_[heap_[0]].id; }
  const EvictionKey& MinKey() const { return entries_[heap_[0]].key; }

  // Evicts MinId(); its buffer is kept for TakeRecycledBuffer if it is the largest seen since the
  // last take. Requires !empty().
  void EvictMin();

  // The kept buffer of an evicted entry (its contents unspecified; an empty string if none), to
  // read the next sample into.
  std::string TakeRecycledBuffer();

 private:
  struct Entry {
    int64_t id = -1;
    int64_t last_tick = 0;
    int32_t heap_pos = -1;
    EvictionKey key;
    std::string data;
  };

  bool Less(int32_t heap_i, int32_t heap_j) const {
    return entries_[heap_[heap_i]].key < entries_[heap_[heap_j]].key;
  }
  void HeapSwap(int32_t i, int32_t j);
  void SiftUp(int32_t pos);
  void SiftDown(int32_t pos);
  void HeapFix(int32_t slot);

  std::vector<int32_t> slot_;  // per id: entry slot or -1
  std::vector<Entry> entries_;
  std::vector<int32_t> free_slots_;
  std::vector<int32_t> heap_;  // entry slots, min-heap by key
  int64_t bytes_ = 0;
  std::string recycled_;
};

}  // namespace fedsched

#endif  // FEDSCHED_CLIENT_CACHE_CACHE_ENTRIES_H_
