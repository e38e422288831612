// SPDX-License-Identifier: MIT
// The same plan on every rank: each MPI process computes the plans of every algorithm for two
// epochs on its own, hashes them, and all hashes are compared with MPI_Allgather. Run under
// `mpirun -np 4` as separate processes, this catches any dependence of a plan on process state:
// addresses, uninitialised memory, the time, or the order work is done in. To make such a
// dependence show, each rank churns its heap differently and computes the plans in a rotated
// order.
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "sampling/graph_sizes.hpp"
#include "sampling/sampler.hpp"

namespace sp = fastmlip::sampling;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int failed = 0;
  try {
    std::vector<std::unique_ptr<char[]>> churn;
    for (int i = 0; i < 200 * (rank + 1); ++i) {
      churn.emplace_back(new char[1 + 37 * (i % 50)]);
    }
    const auto list = sp::synthetic_sizes("table3:20000", 2024);
    const auto atoms = sp::packing_sizes(list, sp::SizeMeasure::parse("atoms"));
    const auto feats = sp::packing_sizes(list, sp::SizeMeasure::parse("atoms+edges+angles"));
    const auto& names = sp::packer_names();
    const int n = static_cast<int>(names.size());
    std::vector<unsigned long long> mine(static_cast<std::size_t>(4 * n));
    for (int k = 0; k < n; ++k) {
      const int a = (k + rank) % n;  // rotated order
      for (int e = 0; e < 2; ++e) {
        sp::PackParams p;
        p.ranks = 4;
        p.seed = 7;
        p.epoch = static_cast<std::uint64_t>(e);
        mine[4 * a + e] = sp::plan_hash(sp::make_plan(names[a], atoms, p));
        p.capacity = 300000;
        mine[4 * a + 2 + e] = sp::plan_hash(sp::make_plan(names[a], feats, p));
      }
    }
    std::vector<unsigned long long> all(mine.size() * static_cast<std::size_t>(size));
    MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_UNSIGNED_LONG_LONG, all.data(),
                  static_cast<int>(mine.size()), MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD);
    for (int r = 1; r < size; ++r) {
      for (std::size_t i = 0; i < mine.size(); ++i) {
        if (all[r * mine.size() + i] != all[i]) {
          if (rank == 0) {
            std::printf("plan %zu (%s) differs between rank 0 and rank %d\n", i, names[i / 4].c_str(), r);
          }
          failed = 1;
        }
      }
    }
    if (size < 2) {
      if (rank == 0) {
        std::printf("run this under mpirun with 2 or more processes\n");
      }
      failed = 1;
    }
    if (!failed && rank == 0) {
      std::printf("the same %zu plans on %d ranks\n", mine.size(), size);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    failed = 1;
  }
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any;
}
