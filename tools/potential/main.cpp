// SPDX-License-Identifier: MIT
// fastmlip-potential: verifies potential files (container, metadata, every tensor's checksum,
// finite weights), and writes a copy of an older file with the checksums it lacks
// (docs/potential-format.md, "Integrity").
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "io/potential_file.hpp"

namespace {

namespace io = fastmlip::io;

constexpr int kExitUsage = 2;

void usage(std::ostream& o) {
  o << "usage: fastmlip-potential check FILE...\n"
       "       fastmlip-potential seal IN OUT\n"
       "\n"
       "check  reads each potential file as the pair styles and train-potential do: the container, the\n"
       "       metadata, the CRC-32 of every tensor and that every weight is finite. Prints one line per\n"
       "       file; exits 1 if any file fails.\n"
       "seal   writes a copy of IN, a file written before fastmlip recorded checksums, to OUT with the\n"
       "       checksum of every tensor (the tensors and the metadata are unchanged). Seal only a file\n"
       "       you trust: damage that is already there would pass every later check.\n";
}

std::string describe(const io::PotentialFile& file) {
  std::uint64_t bytes = 0;
  for (const auto& kv : file.tensors()) {
    bytes += kv.second.data.size();
  }
  const auto all = file.species();
  std::string species;
  if (all.size() <= 8) {
    for (const auto& s : all) {
      species += (species.empty() ? "" : " ") + s.symbol;
    }
  } else {  // a universal model: the list would fill the screen
    species = std::to_string(all.size()) + " (" + all.front().symbol + " ... " + all.back().symbol + ")";
  }
  char size[32];
  std::snprintf(size, sizeof size, "%.3g MB", static_cast<double>(bytes) / 1e6);
  return file.model_kind() + " model, species " + species + ", " + std::to_string(file.size()) + " tensors (" +
         size + ")";
}

int check(const std::vector<std::string>& paths) {
  int status = 0;
  for (const auto& path : paths) {
    try {
      const io::PotentialFile file = io::read_potential_file(path);
      std::cout << path << ": ok: " << describe(file)
                << (file.checksummed ? ", every tensor's checksum verified\n"
                                     : "; note: no checksums (written before fastmlip recorded them), so damage "
                                       "to its weights cannot be detected: 'fastmlip-potential seal' adds them\n");
    } catch (const fastmlip::Error& e) {
      std::cout << path << ": FAILED: " << e.what() << "\n";
      status = 1;
    }
  }
  return status;
}

int seal(const std::string& in, const std::string& out) {
  const io::PotentialFile file = io::read_potential_file(in);
  io::write_potential_file(out, file);
  std::cout << "wrote " << out << ": " << describe(file) << ", with the checksum of every tensor"
            << (file.checksummed ? " (" + in + " had them already)" : "") << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help") {
    usage(args.empty() ? std::cerr : std::cout);
    return args.empty() ? kExitUsage : 0;
  }
  try {
    if (args[0] == "check" && args.size() >= 2) {
      return check({args.begin() + 1, args.end()});
    }
    if (args[0] == "seal" && args.size() == 3) {
      return seal(args[1], args[2]);
    }
  } catch (const fastmlip::Error& e) {
    std::cerr << "fastmlip-potential: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "fastmlip-potential: unknown or incomplete command";
  for (const auto& a : args) {
    std::cerr << " '" << a << "'";
  }
  std::cerr << "\n";
  usage(std::cerr);
  return kExitUsage;
}
