// SPDX-License-Identifier: MIT
#include "core/out_of_memory.hpp"

namespace fastmlip {

bool is_out_of_memory(const std::exception& e) {
  if (dynamic_cast<const Error*>(&e) != nullptr) {
    return false;
  }
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) {
    return true;
  }
  const std::string what = e.what();
  return what.find("failed to allocate") != std::string::npos ||
         what.find("out of memory") != std::string::npos ||
         what.find("can't allocate memory") != std::string::npos;
}

std::string allocator_message(const char* allocator_said) {
  std::string what;
  for (const char* p = allocator_said; *p; ++p) {
    const bool blank = *p == '\n' || *p == ' ';
    if (!(blank && (what.empty() || what.back() == ' '))) {
      what += blank ? ' ' : *p;
    }
  }
  const auto trim = [&what] {
    while (!what.empty() && what.back() == ' ') {
      what.pop_back();
    }
  };
  trim();
  const std::string noise = "Traceback functionality not available";
  if (what.size() >= noise.size() && what.compare(what.size() - noise.size(), noise.size(), noise) == 0) {
    what.erase(what.size() - noise.size());
    trim();
  }
  return what;
}

ResourceError out_of_memory(const MemoryContext& c, const char* allocator_said) {
  const std::string what = allocator_message(allocator_said);
  return ResourceError(
      c.source + ": out of " + c.space + " memory evaluating " + std::to_string(c.n_local) + " local and " +
      std::to_string(c.n_total - c.n_local) + " ghost atoms with " + std::to_string(c.num_edges) +
      " edges in " + (c.single ? "float32" : "float64") + " (" + what +
      "). The work buffers grow with the atoms and edges on each rank: run on more MPI ranks (or "
      "GPUs), so that each holds fewer atoms" +
      (c.single ? "" : ", or evaluate in float32 (half the memory)") + ".");
}

}  // namespace fastmlip
