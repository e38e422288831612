// SPDX-License-Identifier: MIT
#pragma once
/// \file Training checkpoints: everything a run needs to continue exactly where it stopped
/// (model parameters, optimiser moments, scheduler and EMA state, step and epoch counters, the
/// torch CPU generator and any other counters the loop keeps), as named entries in one file.
///
/// File layout (little-endian, version 1):
///
///   "FMLPCKPT"  u32 version  u64 payload_bytes  u64 FNV-1a-64(payload)  payload
///   payload:    u64 entries, then per entry: u8 kind (0 tensor, 1 int64, 2 double, 3 text),
///               u64 key length, key bytes, and the value:
///                 tensor: u8 dtype (0 f64, 1 f32, 2 i64, 3 u8), u32 ndim, i64 dims[ndim],
///                         u64 data bytes, the contiguous data
///                 int64, double: 8 bytes;  text: u64 length, bytes
///
/// Entries are written in key order, so the same state gives the same bytes. Values are stored
/// bit for bit: a restart continues with the exact doubles. The file is written by
/// io::write_file_atomically (temporary file in the same directory, fsync, rename), so a failed
/// write (disk full, unwritable directory) leaves the previous checkpoint intact. Reading
/// checks the magic, version, length (truncation) and checksum (corruption) and every record's
/// bounds; each error is a FileError naming the file and what is wrong.
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace fastmlip::trainer::train {

/// The named entries of a checkpoint. The accessors throw InputError naming `source` and the
/// key when an entry is missing or has the wrong shape or dtype.
struct CheckpointState {
  std::map<std::string, torch::Tensor> tensors;  ///< CPU tensors (f64, f32, i64, u8)
  std::map<std::string, std::int64_t> ints;
  std::map<std::string, double> reals;
  std::map<std::string, std::string> texts;
  std::string source = "checkpoint";  ///< the file it was read from, for messages

  const torch::Tensor& tensor(const std::string& key) const;
  std::int64_t integer(const std::string& key) const;
  double real(const std::string& key) const;
  const std::string& text(const std::string& key) const;
  bool has_tensor(const std::string& key) const { return tensors.count(key) != 0; }
};

/// The file's bytes (see the file comment). Throws InputError for a tensor of another dtype.
std::string serialize_checkpoint(const CheckpointState& state);
/// Parses bytes produced by serialize_checkpoint; `source` names them in every error.
CheckpointState parse_checkpoint(const std::string& bytes, const std::string& source);

/// serialize_checkpoint written atomically to `path`.
void write_checkpoint(const std::string& path, const CheckpointState& state);
/// Reads and checks `path`; FileError naming it for a missing, truncated or corrupt file.
CheckpointState read_checkpoint(const std::string& path);

/// Stores `prefix + name` -> a detached CPU copy of each tensor.
void save_tensors(CheckpointState& state, const std::string& prefix,
                  const std::vector<std::pair<std::string, torch::Tensor>>& named);
/// Copies `prefix + name` into each tensor in place (no autograd); InputError when one is
/// missing or its shape or dtype differs.
void load_tensors(const CheckpointState& state, const std::string& prefix,
                  const std::vector<std::pair<std::string, torch::Tensor>>& named);

/// The default torch CPU generator's state ("rng/torch_cpu"), and setting it back.
void save_torch_rng(CheckpointState& state);
void load_torch_rng(const CheckpointState& state);

}  // namespace fastmlip::trainer::train
