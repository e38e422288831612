// SPDX-License-Identifier: MIT
#pragma once
/// \file `train-potential preprocess` (docs/train-potential.md, "Preprocessed datasets"): reads the
/// training, validation and test files of a training configuration once and writes each as a
/// preprocessed dataset (data/store.hpp) under --output: OUTPUT/train, OUTPUT/valid, OUTPUT/test.
/// A training run then takes --train_file OUTPUT/train (and the others likewise) with the same
/// data options, and trains exactly as from the files themselves.
///
/// On W ranks, rank r parses, counts and writes graphs r, r + W, ... into its own shard, one at a
/// time (of an extended XYZ file it reads only the comment lines of the other frames); rank 0
/// gathers what the index needs of every graph, writes the index last and renames the finished
/// directory into place.
#include <mpi.h>

#include <ostream>
#include <string>
#include <vector>

namespace fastmlip::trainer::train {

/// Runs the command on `args` (after "preprocess"); returns the exit status. Throws
/// fastmlip::Error for bad input, naming the file.
int run_preprocess_command(const std::vector<std::string>& args, MPI_Comm comm, std::ostream& out);

/// The help text of the command.
std::string preprocess_help();

}  // namespace fastmlip::trainer::train
