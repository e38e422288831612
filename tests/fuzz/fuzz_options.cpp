// SPDX-License-Identifier: MIT
// train-potential's options (trainer/options.*): its YAML config file and its command line.
// The input is the config file's text, a NUL byte, then one command-line argument per line. It
// goes through parse_command_line as train-potential's main calls it (every --config names the
// scratch file that holds the text), then through load_yaml + apply_flags + check_required;
// options that pass must survive to_yaml -> load_yaml unchanged (a run's log and checkpoint
// record them so).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "fuzz_util.hpp"
#include "options.hpp"

namespace {

using fastmlip::trainer::Options;

void check_round_trip(const Options& o) {
  const std::string yaml = o.to_yaml();
  Options back;
  try {
    back.load_yaml(yaml, "round-trip.yaml");
  } catch (const fastmlip::Error& e) {
    fastmlip::fuzz::fail(std::string("to_yaml wrote what load_yaml refuses: ") + e.what() + "\n" + yaml);
  }
  for (const auto& s : fastmlip::trainer::option_table()) {
    if (s.cli_only) {
      continue;
    }
    if (!(back.value(s.name) == o.value(s.name))) {
      fastmlip::fuzz::fail("option '" + s.name + "' changed in the to_yaml -> load_yaml round trip:\n" + yaml);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = input.find('\0');
  const std::string yaml = input.substr(0, nul);
  std::vector<std::string> args, flags;
  if (nul != std::string::npos) {
    std::size_t begin = nul + 1;
    while (begin <= input.size()) {
      std::size_t end = input.find('\n', begin);
      if (end == std::string::npos) {
        end = input.size();
      }
      args.push_back(input.substr(begin, end - begin));
      begin = end + 1;
    }
  }
  const std::string config = fastmlip::fuzz::scratch_path(".yaml");
  fastmlip::fuzz::write_input(config, data, yaml.size());
  // Only the scratch file may be read: every --config names it.
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config" && i + 1 < args.size()) {
      args[++i] = config;
    } else if (args[i].compare(0, 9, "--config=") == 0) {
      args[i] = "--config=" + config;
    } else if (args[i] != "--config" && args[i] != "--help" && args[i] != "-h") {
      flags.push_back(args[i]);
    }
  }
  try {
    fastmlip::trainer::parse_command_line(args);
  } catch (const fastmlip::Error&) {
  }
  Options o;
  try {
    o.load_yaml(yaml, "fuzz.yaml");
    o.apply_flags(flags);
    o.check_required();  // what a run records has passed it (a required option without value writes null)
  } catch (const fastmlip::Error&) {
    return 0;
  }
  check_round_trip(o);
  return 0;
}
