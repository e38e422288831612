// SPDX-License-Identifier: MIT
#include "train/checkpoint.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "core/error.hpp"
#include "io/atomic_file.hpp"

namespace fastmlip::trainer::train {
namespace {

constexpr char kMagic[8] = {'F', 'M', 'L', 'P', 'C', 'K', 'P', 'T'};
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kHeaderBytes = 8 + 4 + 8 + 8;

enum Kind : std::uint8_t { kTensor = 0, kInt = 1, kReal = 2, kText = 3 };

std::uint64_t fnv1a64(const char* data, std::size_t n) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 1099511628211ull;
  }
  return h;
}

// The project builds only for little-endian hosts (the potential files assume it too), so
// values are copied as they lie in memory.
template <class T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

void put_text(std::string& out, const std::string& s) {
  put<std::uint64_t>(out, s.size());
  out.append(s);
}

std::uint8_t dtype_code(const torch::Tensor& t, const std::string& key) {
  switch (t.scalar_type()) {
    case torch::kFloat64:
      return 0;
    case torch::kFloat32:
      return 1;
    case torch::kInt64:
      return 2;
    case torch::kUInt8:
      return 3;
    default:
      throw InputError("serialize_checkpoint: tensor '" + key + "' has dtype " +
                       std::string(c10::toString(t.scalar_type())) +
                       "; checkpoints hold f64, f32, i64 and u8");
  }
}

torch::Dtype code_dtype(std::uint8_t c) {
  constexpr torch::Dtype kTypes[] = {torch::kFloat64, torch::kFloat32, torch::kInt64, torch::kUInt8};
  return kTypes[c];
}

/// Bounds-checked reads; every failure names the file and the offset.
class Reader {
 public:
  Reader(const std::string& bytes, std::size_t pos, const std::string& source)
      : m_bytes(bytes), m_pos(pos), m_source(source) {}
  [[noreturn]] void fail(const std::string& what) const {
    throw FileError(m_source, 0, "corrupt checkpoint at byte " + std::to_string(m_pos) + ": " + what);
  }
  void need(std::uint64_t n, const char* what) const {
    if (n > m_bytes.size() - m_pos) {
      fail(std::string(what) + " runs past the end of the payload (" + std::to_string(n) + " bytes needed, " +
           std::to_string(m_bytes.size() - m_pos) + " left)");
    }
  }
  template <class T>
  T get(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, m_bytes.data() + m_pos, sizeof(T));
    m_pos += sizeof(T);
    return v;
  }
  std::string text(const char* what) {
    const auto n = get<std::uint64_t>(what);
    need(n, what);
    std::string s = m_bytes.substr(m_pos, n);
    m_pos += n;
    return s;
  }
  const char* raw(std::uint64_t n, const char* what) {
    need(n, what);
    const char* p = m_bytes.data() + m_pos;
    m_pos += n;
    return p;
  }
  std::size_t pos() const { return m_pos; }

 private:
  const std::string& m_bytes;
  std::size_t m_pos;
  const std::string& m_source;
};

template <class M>
const typename M::mapped_type& lookup(const M& m, const std::string& key, const std::string& source,
                                      const char* kind) {
  const auto it = m.find(key);
  if (it == m.end()) {
    throw InputError(source + ": checkpoint has no " + kind + " entry '" + key +
                     "' (written by another model, optimiser or version?)");
  }
  return it->second;
}

}  // namespace

const torch::Tensor& CheckpointState::tensor(const std::string& key) const {
  return lookup(tensors, key, source, "tensor");
}
std::int64_t CheckpointState::integer(const std::string& key) const {
  return lookup(ints, key, source, "integer");
}
double CheckpointState::real(const std::string& key) const { return lookup(reals, key, source, "real"); }
const std::string& CheckpointState::text(const std::string& key) const {
  return lookup(texts, key, source, "text");
}

std::string serialize_checkpoint(const CheckpointState& state) {
  // One sorted sequence over the four maps, so the bytes depend on the keys only.
  std::map<std::string, Kind> keys;
  auto add = [&](const std::string& k, Kind kind) {
    if (!keys.emplace(k, kind).second) {
      throw InputError("serialize_checkpoint: key '" + k + "' is used by two kinds of entry");
    }
  };
  for (const auto& kv : state.tensors) {
    add(kv.first, kTensor);
  }
  for (const auto& kv : state.ints) {
    add(kv.first, kInt);
  }
  for (const auto& kv : state.reals) {
    add(kv.first, kReal);
  }
  for (const auto& kv : state.texts) {
    add(kv.first, kText);
  }
  std::string payload;
  put<std::uint64_t>(payload, keys.size());
  for (const auto& [key, kind] : keys) {
    put<std::uint8_t>(payload, kind);
    put_text(payload, key);
    if (kind == kTensor) {
      const torch::Tensor& t0 = state.tensors.at(key);
      if (!t0.defined()) {
        throw InputError("serialize_checkpoint: tensor '" + key + "' is undefined");
      }
      put<std::uint8_t>(payload, dtype_code(t0, key));
      const torch::Tensor t = t0.detach().to(torch::kCPU).contiguous();
      put<std::uint32_t>(payload, static_cast<std::uint32_t>(t.dim()));
      for (const auto d : t.sizes()) {
        put<std::int64_t>(payload, d);
      }
      const std::uint64_t nbytes = static_cast<std::uint64_t>(t.numel()) * t.element_size();
      put<std::uint64_t>(payload, nbytes);
      payload.append(static_cast<const char*>(t.data_ptr()), nbytes);
    } else if (kind == kInt) {
      put<std::int64_t>(payload, state.ints.at(key));
    } else if (kind == kReal) {
      put<double>(payload, state.reals.at(key));
    } else {
      put_text(payload, state.texts.at(key));
    }
  }
  std::string out(kMagic, sizeof kMagic);
  put<std::uint32_t>(out, kVersion);
  put<std::uint64_t>(out, payload.size());
  put<std::uint64_t>(out, fnv1a64(payload.data(), payload.size()));
  out += payload;
  return out;
}

CheckpointState parse_checkpoint(const std::string& bytes, const std::string& source) {
  if (bytes.size() < kHeaderBytes) {
    throw FileError(source, 0,
                    "not a fastmlip checkpoint or truncated: " + std::to_string(bytes.size()) +
                        " bytes, shorter than the " + std::to_string(kHeaderBytes) + "-byte header");
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    throw FileError(source, 0, "not a fastmlip checkpoint (the file does not start with 'FMLPCKPT')");
  }
  Reader header(bytes, sizeof kMagic, source);
  const auto version = header.get<std::uint32_t>("version");
  if (version != kVersion) {
    throw FileError(source, 0,
                    "checkpoint format version " + std::to_string(version) + "; this build reads version " +
                        std::to_string(kVersion));
  }
  const auto payload_bytes = header.get<std::uint64_t>("payload size");
  const auto checksum = header.get<std::uint64_t>("checksum");
  const std::uint64_t have = bytes.size() - kHeaderBytes;
  if (have != payload_bytes) {
    throw FileError(source, 0,
                    std::string(have < payload_bytes ? "truncated" : "corrupt") +
                        " checkpoint: the header says " + std::to_string(payload_bytes) +
                        " payload bytes, the file has " + std::to_string(have));
  }
  if (fnv1a64(bytes.data() + kHeaderBytes, have) != checksum) {
    throw FileError(source, 0, "corrupt checkpoint: the payload's checksum does not match the header's");
  }
  CheckpointState state;
  state.source = source;
  Reader r(bytes, kHeaderBytes, source);
  const auto n = r.get<std::uint64_t>("entry count");
  for (std::uint64_t e = 0; e < n; ++e) {
    const auto kind = r.get<std::uint8_t>("entry kind");
    std::string key = r.text("entry key");
    if (kind == kTensor) {
      const auto code = r.get<std::uint8_t>("tensor dtype");
      if (code > 3) {
        r.fail("tensor '" + key + "' has unknown dtype code " + std::to_string(code));
      }
      const auto ndim = r.get<std::uint32_t>("tensor rank");
      if (ndim > 16) {
        r.fail("tensor '" + key + "' has rank " + std::to_string(ndim));
      }
      std::vector<std::int64_t> dims(ndim);
      std::uint64_t numel = 1;
      for (auto& d : dims) {
        d = r.get<std::int64_t>("tensor dimension");
        if (d < 0) {
          r.fail("tensor '" + key + "' has a negative dimension");
        }
        numel *= static_cast<std::uint64_t>(d);
      }
      const torch::Dtype dtype = code_dtype(code);
      const auto nbytes = r.get<std::uint64_t>("tensor size");
      if (nbytes != numel * c10::elementSize(dtype)) {
        r.fail("tensor '" + key + "' declares " + std::to_string(nbytes) + " bytes for " +
               std::to_string(numel) + " elements");
      }
      const char* data = r.raw(nbytes, "tensor data");
      torch::Tensor t = torch::empty(dims, torch::TensorOptions().dtype(dtype));
      if (nbytes > 0) {
        std::memcpy(t.data_ptr(), data, nbytes);
      }
      state.tensors.emplace(std::move(key), std::move(t));
    } else if (kind == kInt) {
      state.ints.emplace(std::move(key), r.get<std::int64_t>("integer"));
    } else if (kind == kReal) {
      state.reals.emplace(std::move(key), r.get<double>("real"));
    } else if (kind == kText) {
      state.texts.emplace(key, r.text("text"));
    } else {
      r.fail("entry '" + key + "' has unknown kind " + std::to_string(kind));
    }
  }
  if (r.pos() != bytes.size()) {
    r.fail(std::to_string(bytes.size() - r.pos()) + " bytes after the last entry");
  }
  return state;
}

void write_checkpoint(const std::string& path, const CheckpointState& state) {
  const std::string bytes = serialize_checkpoint(state);
  io::write_file_atomically(path, [&](std::ostream& out) { out.write(bytes.data(), bytes.size()); });
}

CheckpointState read_checkpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw FileError(path, 0, std::string("cannot open checkpoint: ") + std::strerror(errno));
  }
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) {
    throw FileError(path, 0, "read error");
  }
  return parse_checkpoint(bytes, path);
}

void save_tensors(CheckpointState& state, const std::string& prefix,
                  const std::vector<std::pair<std::string, torch::Tensor>>& named) {
  for (const auto& [name, t] : named) {
    state.tensors[prefix + name] = t.detach().to(torch::kCPU).clone();
  }
}

void load_tensors(const CheckpointState& state, const std::string& prefix,
                  const std::vector<std::pair<std::string, torch::Tensor>>& named) {
  torch::NoGradGuard no_grad;
  for (const auto& [name, t] : named) {
    const torch::Tensor& src = state.tensor(prefix + name);
    if (src.sizes() != t.sizes() || src.scalar_type() != t.scalar_type()) {
      throw InputError(state.source + ": checkpoint tensor '" + prefix + name + "' is " +
                       std::string(c10::toString(src.scalar_type())) + c10::str(src.sizes()) +
                       ", the model's " + std::string(c10::toString(t.scalar_type())) + c10::str(t.sizes()) +
                       " (a checkpoint of another model or dtype?)");
    }
    t.copy_(src);
  }
}

void save_torch_rng(CheckpointState& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  state.tensors["rng/torch_cpu"] = gen.get_state();
}

void load_torch_rng(const CheckpointState& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state.tensor("rng/torch_cpu"));
}

}  // namespace fastmlip::trainer::train
