// Pageable host memory for a sweep's float32-pageable batch, the same in both programs as on the Python side:
// aligned to 2 MiB and advised onto transparent huge pages, as numpy (the Python side's buffer) advises large
// arrays. The page size decides how many page faults writing a batch takes and how the driver stages a pageable
// copy, so without this the programs' float32-pageable copies would not be compared like with like.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>

namespace ac {

inline constexpr std::size_t kHugePage = std::size_t{2} << 20;

// nullptr when the memory is not there; free with std::free.
inline void* pageable_alloc(std::size_t bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, kHugePage, bytes ? bytes : 1) != 0) return nullptr;
  if (bytes >= kHugePage) madvise(p, bytes, MADV_HUGEPAGE);  // advice: a kernel without THP ignores it
  return p;
}

}  // namespace ac
