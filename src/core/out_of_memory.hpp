// SPDX-License-Identifier: MIT
#pragma once
/// \file Failed allocations as typed errors. Kokkos reports a failed host allocation as a
/// std::bad_alloc and a failed device allocation (CUDA) as a std::runtime_error saying "failed
/// to allocate". A model's compute() turns either into a ResourceError. The error names what
/// was being evaluated and says what to do; uncaught, the exception would end a LAMMPS run.
#include <exception>
#include <new>
#include <stdexcept>
#include <string>

#include "core/error.hpp"

namespace fastmlip {

/// What a model was evaluating when memory ran out, for the message.
struct MemoryContext {
  std::string source;  ///< the potential file (its display name)
  const char* space;   ///< the memory space, e.g. Kokkos' HostSpace::name()
  bool single;         ///< float32 (else float64)
  int n_local, n_total, num_edges;
};

/// "<source>: out of <space> memory evaluating N local and M ghost atoms with E edges in
/// float64 (<the allocator's text, on one line>). <what to do>".
ResourceError out_of_memory(const MemoryContext& c, const char* allocator_said);

/// Whether `e` reports a failed allocation: a std::bad_alloc (Kokkos' host allocations), Kokkos'
/// "failed to allocate" (its device allocations), or LibTorch's "out of memory" (its CUDA
/// caching allocator's c10::OutOfMemoryError) and "can't allocate memory" (its CPU allocator).
/// fastmlip's own errors never are.
bool is_out_of_memory(const std::exception& e);

/// An allocator's message on one line, without Kokkos' closing note that it has no traceback.
std::string allocator_message(const char* allocator_said);

/// Runs f(); a failed allocation inside it becomes out_of_memory(context()). `context` is only
/// called then.
template <class F, class Context>
void translate_out_of_memory(F&& f, Context&& context) {
  try {
    f();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    if (is_out_of_memory(e)) {
      throw out_of_memory(context(), e.what());
    }
    throw;
  }
}

}  // namespace fastmlip
