// SPDX-License-Identifier: MIT
// GoogleTest main for tests that run under mpirun: every rank runs every test, and the
// process exits non-zero if any rank failed, so ctest sees a failure on any rank.
#include <gtest/gtest.h>
#include <mpi.h>

int main(int argc, char** argv) {
  // As train-potential: the overlapped all-reduce may call MPI from LibTorch's backward threads.
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    // Keep one copy of the report; failures on other ranks still print their assertion.
    delete ::testing::UnitTest::GetInstance()->listeners().Release(
        ::testing::UnitTest::GetInstance()->listeners().default_result_printer());
  }
  int local_fail = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_fail = 0;
  MPI_Allreduce(&local_fail, &any_fail, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_fail;
}
