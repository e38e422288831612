// SPDX-License-Identifier: MIT
// One graph record of a preprocessed dataset (trainer/data/graph_record.*), as train-potential
// reads it from a shard. The first byte picks what the rest is: a whole record (header, length,
// checksum, payload) or a payload alone, so that the payload's parser is reached although random
// bytes seldom carry a matching checksum. A payload that decodes must encode and decode to the
// same bytes again.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "data/graph_record.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  namespace d = fastmlip::trainer::data;
  const char* bytes = reinterpret_cast<const char*>(data) + 1;
  try {
    const d::Config c = (data[0] & 1) ? d::decode_graph_record(bytes, size - 1, "fuzz.mdb (graph 0)")
                                      : d::decode_graph_payload(bytes, size - 1, "fuzz.mdb (graph 0)");
    const std::string once = d::encode_graph_record(c);
    const std::string twice =
        d::encode_graph_record(d::decode_graph_record(once.data(), once.size(), "again"));
    if (once != twice) {
      fastmlip::fuzz::fail("a decoded record does not encode to the same bytes twice");
    }
  } catch (const fastmlip::Error&) {
  }
  return 0;
}
