// SPDX-License-Identifier: MIT
// train-potential: options, then the training loop of trainer/train/run.cpp
// (docs/train-potential.md); `train-potential eval ...` evaluates a potential file on a dataset
// (trainer/train/evaluate.cpp); `train-potential preprocess ...` stores datasets in binary
// (trainer/train/preprocess.cpp). Errors are one line on stderr and exit status 1; --help prints the
// options table (eval --help the eval options) and exits 0.
#include <mpi.h>

#include <csignal>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "models/device.hpp"
#include "options.hpp"
#include "train/evaluate.hpp"
#include "train/preprocess.hpp"
#include "train/run.hpp"

namespace {

int fail(std::string message, int world) {
  // The loop's own messages already start with the program's name.
  const std::string self = "train-potential: ";
  if (message.rfind(self, 0) == 0) {
    message.erase(0, self.size());
  }
  std::cerr << self << "error: " << message << std::endl;
  if (world > 1) {
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  // A file size limit (ulimit -f, a batch system's) then fails the write that crosses it with
  // EFBIG, which the writers report naming the file, instead of killing the process unexplained.
  std::signal(SIGXFSZ, SIG_IGN);
  // SERIALIZED: on a GPU, LibTorch runs backward on its own device thread, and the overlapped
  // gradient all-reduce starts buckets from the hooks there while the main thread waits in
  // backward (distributed.hpp). An MPI that offers less leaves them to the end of the step.
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (argc > 1 && std::string(argv[1]) == "eval") {
    fastmlip::trainer::start_kokkos();
    int rc = 0;
    try {
      rc = fastmlip::trainer::train::run_eval_command(std::vector<std::string>(argv + 2, argv + argc),
                                                      std::cout);
    } catch (const std::exception& e) {
      return fail(e.what(), world);
    }
    MPI_Finalize();
    return rc;
  }
  if (argc > 1 && std::string(argv[1]) == "preprocess") {
    int rc = 0;
    try {
      rc = fastmlip::trainer::train::run_preprocess_command(std::vector<std::string>(argv + 2, argv + argc),
                                                            MPI_COMM_WORLD, std::cout);
    } catch (const std::exception& e) {
      return fail(e.what(), world);
    }
    MPI_Finalize();
    return rc;
  }
  fastmlip::trainer::CommandLine cl;
  try {
    cl = fastmlip::trainer::parse_command_line(argc, argv);
  } catch (const std::exception& e) {
    return fail(e.what(), world);
  }
  if (cl.help) {
    if (rank == 0) {
      std::cout << fastmlip::trainer::render_help();
      std::cout << "\nEvaluating a potential file on a dataset: train-potential eval --help\n";
      std::cout << "Preprocessing the data once into binary datasets: train-potential preprocess --help\n";
    }
    MPI_Finalize();
    return 0;
  }
  // With CUDA kernels, Kokkos runs on the GPU this rank trains on (training_device: node-local
  // rank mod the GPUs), where LibTorch puts the model.
  int kokkos_device = 0;
  if (fastmlip::trainer::device_kernels_cuda()) {
    try {
      // Kokkos-CUDA stops the process where it finds no GPU: say why first (run_training checks
      // the options again, which in a CPU build is the only check).
      fastmlip::trainer::train::check_implemented(cl.options);
      const torch::Device device = fastmlip::trainer::train::training_device(cl.options, MPI_COMM_WORLD);
      if (!device.is_cuda() && torch::cuda::device_count() == 0) {
        return fail(
            "this train-potential was built with CUDA kernels (the trainer-cuda preset), whose Kokkos "
            "needs a GPU to start, and LibTorch sees none; run it on a GPU node, or use a CPU build (the "
            "default preset)",
            world);
      }
      kokkos_device = device.is_cuda() ? device.index() : 0;
    } catch (const std::exception& e) {
      return fail(e.what(), world);
    }
  }
  fastmlip::trainer::start_kokkos(kokkos_device);
  try {
    fastmlip::trainer::train::run_training(cl.options, MPI_COMM_WORLD, std::cout);
  } catch (const std::exception& e) {
    return fail(e.what(), world);
  }
  MPI_Finalize();
  return 0;
}
