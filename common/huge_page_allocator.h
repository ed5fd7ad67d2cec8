// An allocator for the large per-client arrays that are read at scattered indices every round
// (the profile book's states, the planner's candidate pool): a buffer of 2 MiB or more is
// 2 MiB-aligned and marked for transparent huge pages (madvise MADV_HUGEPAGE) before it is first
// touched, so that one TLB entry covers 2 MiB rather than 4 KiB. At a million clients the states
// span ~160 MB and a round's candidates touch one 4 KiB page every few candidates: with 4 KiB
// pages most of those reads missed the TLB (docs/reports/SIMULATION.md, speed at a million
// clients). Smaller buffers, and systems without transparent huge pages, get plain memory; the
// hint changes no value. Header-only; no state.
#ifndef FEDSCHED_COMMON_HUGE_PAGE_ALLOCATOR_H_
#define FEDSCHED_COMMON_HUGE_PAGE_ALLOCATOR_H_

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace fedsched {

// Size (and alignment) of a transparent huge page on x86-64 and most arm64 kernels, bytes.
inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// A std::allocator-compatible allocator (stateless; all instances compare equal). allocate(n)
// throws std::bad_alloc when memory is exhausted, as std::allocator does.
template <typename T>
class HugePageAllocator {
 public:
  using value_type = T;

  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT: implicit, as allocators are

  // n objects of T, uninitialised: huge-page backed when n * sizeof(T) >= kHugePageBytes.
  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < kHugePageBytes) return std::allocator<T>().allocate(n);
    const size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
    void* p = std::aligned_alloc(kHugePageBytes, rounded);
    if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    (void)madvise(p, rounded, MADV_HUGEPAGE);  // a hint: failure leaves 4 KiB pages
#endif
    return static_cast<T*>(p);
  }

  // Frees what allocate(n) returned, with the same n.
  void deallocate(T* p, size_t n) {
    if (n * sizeof(T) < kHugePageBytes) {
      std::allocator<T>().deallocate(p, n);
    } else {
      std::free(p);
    }
  }

  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
  template <typename U>
  bool operator!=(const HugePageAllocator<U>&) const {
    return false;
  }
};

}  // namespace fedsched

#endif  // FEDSCHED_COMMON_HUGE_PAGE_ALLOCATOR_H_
