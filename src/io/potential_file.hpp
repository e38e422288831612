// SPDX-License-Identifier: MIT
#pragma once
/// \file Potential files: fastmlip's models in the safetensors container.
///
/// One file per potential (see docs/potential-format.md, the normative description): an 8-byte
/// little-endian header length N, N bytes of JSON header naming each tensor's dtype, shape and
/// byte range, then the raw little-endian, row-major tensor bytes. The header's
/// `__metadata__` (string to string, as safetensors requires) holds `format`,
/// `format_version` and `fastmlip`, the last being JSON text with the model kind, species,
/// cutoffs, units, dtype, hyperparameters and provenance, and `tensor_crc32`, JSON text
/// mapping every tensor's name to the CRC-32 of its bytes.
///
/// A file verifies itself at load: every tensor's bytes against its CRC-32 (a damaged file is a
/// FileError naming the tensor), and every floating value finite (a NaN or infinite weight is a
/// FileError naming the tensor and element). Files written before checksums existed still load;
/// PotentialFile::checksummed says so, and the pair styles and the trainer print a note.
///
/// Reading never executes anything from the file and checks every length, offset, dtype and
/// shape before touching the bytes, so a truncated, corrupt or hostile file is a FileError
/// naming the path and the problem, never a crash or an out-of-bounds read.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/error.hpp"

// The tensor bytes are little-endian on disk and are copied to and from memory as they are.
// A big-endian host would need a byte swap on every access; no supported platform is one.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "fastmlip potential files assume a little-endian host (see docs/potential-format.md)");

namespace fastmlip::io {

/// The newest potential-file format version this build reads and the one it writes.
inline constexpr int kPotentialFormatVersion = 1;
/// The `format` string of `__metadata__` that marks a fastmlip potential.
inline constexpr const char* kPotentialFormatName = "fastmlip-potential";
/// safetensors' own limit on the JSON header (its reference reader refuses larger ones), so
/// a hostile length cannot make us parse, or allocate, an unbounded header.
inline constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
/// The `__metadata__` key of the per-tensor checksums: JSON text {"name": "8 hex digits", ...},
/// the CRC-32 (zlib's, the ISO-HDLC polynomial) of each tensor's bytes, one entry per tensor.
inline constexpr const char* kChecksumKey = "tensor_crc32";
/// Deepest nesting of arrays/objects accepted in the header and the metadata JSON. Real files
/// nest a few levels; the bound keeps anything that walks the JSON recursively off the stack limit.
inline constexpr int kMaxJsonDepth = 64;

/// Element types of the safetensors container that have a whole number of bytes. The
/// sub-byte types of recent safetensors versions (F4, F6_*) cannot be stored by this reader
/// and are refused with a message.
enum class DType : std::uint8_t {
  BOOL,
  U8,
  I8,
  F8_E4M3,
  F8_E5M2,
  U16,
  I16,
  F16,
  BF16,
  U32,
  I32,
  F32,
  U64,
  I64,
  F64,
};

/// The safetensors name of a dtype ("F64").
const char* dtype_name(DType dtype) noexcept;
/// Bytes per element.
std::size_t dtype_size(DType dtype) noexcept;
/// The dtype called `name` ("F64"); throws InputError listing the known names otherwise.
DType parse_dtype(std::string_view name);

/// The dtype that holds a C++ type; only defined for the types Tensor::as<T>() supports.
template <class T>
struct DTypeOf;
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::F64;
};
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::F32;
};
template <>
struct DTypeOf<std::int64_t> {
  static constexpr DType value = DType::I64;
};
template <>
struct DTypeOf<std::int32_t> {
  static constexpr DType value = DType::I32;
};
template <>
struct DTypeOf<std::int16_t> {
  static constexpr DType value = DType::I16;
};
template <>
struct DTypeOf<std::int8_t> {
  static constexpr DType value = DType::I8;
};
template <>
struct DTypeOf<std::uint64_t> {
  static constexpr DType value = DType::U64;
};
template <>
struct DTypeOf<std::uint32_t> {
  static constexpr DType value = DType::U32;
};
template <>
struct DTypeOf<std::uint16_t> {
  static constexpr DType value = DType::U16;
};
template <>
struct DTypeOf<std::uint8_t> {
  static constexpr DType value = DType::U8;
};

/// How Tensor::as<T>() treats a stored dtype that is not T's own.
enum class Conversion {
  exact,  ///< the stored dtype must be T's dtype
  widen,  ///< also accept dtypes whose every value T represents exactly: F32 as double,
          ///< I32/U16/... as int64_t, U8 as uint32_t, and so on (never float <-> integer)
};

/// True when every value of `from` is exactly representable in `to` (and of the same kind,
/// floating or integer); that is what Conversion::widen accepts.
bool widens_to(DType from, DType to) noexcept;

/// Matches any extent in an expected shape (check_tensor, PotentialFile::get).
inline constexpr std::int64_t kAnyExtent = -1;

/// One named tensor: little-endian, row-major (C order), no strides.
struct Tensor {
  std::string name;
  DType dtype = DType::F64;
  std::vector<std::int64_t> shape;  ///< empty for a scalar; extents >= 0
  std::vector<std::byte> data;      ///< numel() * dtype_size(dtype) bytes

  /// Number of elements: the product of the extents (1 for a scalar, 0 if an extent is 0).
  std::int64_t numel() const;

  /// The values as T. With Conversion::exact the dtype must be T's; with Conversion::widen
  /// any dtype that widens_to T's is converted exactly. Throws InputError naming the tensor
  /// when the dtype does not fit or the data size disagrees with dtype and shape; use
  /// PotentialFile::values() for a message that also names the file.
  template <class T>
  std::vector<T> as(Conversion conversion = Conversion::exact) const;

  /// A tensor from values; throws InputError if the extents are negative or their product
  /// is not values.size().
  template <class T>
  static Tensor from(std::string name, std::vector<std::int64_t> shape, const std::vector<T>& values);
};

/// The CRC-32 (zlib's crc32) of a tensor's bytes, as recorded under kChecksumKey.
std::uint32_t tensor_crc32(const Tensor& tensor) noexcept;
/// "" when every value of a floating tensor (F64, F32, F16, BF16, F8_*) is finite or the tensor
/// holds integers; otherwise "element I (index [a, b]) is nan" for the first non-finite one.
std::string non_finite_element(const Tensor& tensor);

/// Shape as text, "[3, 4]" ("[]" for a scalar, "*" for kAnyExtent).
std::string shape_string(const std::vector<std::int64_t>& shape);

/// Checks a tensor against what a model loader expects: one of `dtypes` and `shape`, where
/// kAnyExtent matches any extent. Throws FileError naming `source`, the tensor, what it has
/// and what was expected. This is the check model loaders run on every tensor they read.
void check_tensor(const Tensor& tensor, std::initializer_list<DType> dtypes,
                  const std::vector<std::int64_t>& shape, const std::string& source);

/// One species of a potential, in the model's own order (index = the model's species index).
struct PotentialSpecies {
  int z = 0;           ///< atomic number
  std::string symbol;  ///< element symbol, consistent with z
};

/// The index of atomic number `z` in a model's species list (its order), or -1 without it.
int species_index(const std::vector<PotentialSpecies>& species, int z);

/// A potential in memory: tensors by name plus metadata. Built by a converter or the trainer
/// and written with write_potential_file, or read with read_potential_file.
class PotentialFile {
 public:
  /// fastmlip's structured metadata, stored as JSON text under `__metadata__.fastmlip`.
  /// Required keys (docs/potential-format.md): "model", "species", "cutoffs", "units",
  /// "dtype", "hyperparameters", "provenance". Checked by validate_metadata() on write and read.
  nlohmann::json metadata = nlohmann::json::object();
  /// Other `__metadata__` strings (not format, format_version, fastmlip), kept so that a
  /// read-write round trip loses nothing a Python tool added.
  std::map<std::string, std::string> extra_metadata;
  /// The path this was read from (empty if built in memory); errors name it.
  std::string source;
  /// Whether the file read carried per-tensor checksums (all of them verified at load). False
  /// for a file written before fastmlip recorded checksums, and for a potential built in memory.
  bool checksummed = false;

  /// Adds a tensor; throws InputError if the name is empty, "__metadata__" or already
  /// present, or if shape and values disagree.
  template <class T>
  const Tensor& add(std::string name, std::vector<std::int64_t> shape, const std::vector<T>& values) {
    return add(Tensor::from(std::move(name), std::move(shape), values));
  }
  /// Adds a tensor built elsewhere (any dtype); the same checks, plus data size against
  /// dtype and shape.
  const Tensor& add(Tensor tensor);

  bool contains(const std::string& name) const noexcept { return m_tensors.count(name) != 0; }
  std::size_t size() const noexcept { return m_tensors.size(); }
  /// All tensors, by name.
  const std::map<std::string, Tensor>& tensors() const noexcept { return m_tensors; }

  /// The tensor `name`; throws FileError naming the file and the missing tensor.
  const Tensor& get(const std::string& name) const;
  /// The tensor `name`, checked with check_tensor against `dtypes` and `shape`.
  const Tensor& get(const std::string& name, std::initializer_list<DType> dtypes,
                    const std::vector<std::int64_t>& shape) const;
  /// The values of tensor `name` as T, after checking its shape (kAnyExtent: any extent) and
  /// that its dtype is T's (or, with Conversion::widen, widens to it). Errors are FileErrors
  /// naming the file, the tensor, what it holds and what was expected.
  template <class T>
  std::vector<T> values(const std::string& name, const std::vector<std::int64_t>& shape,
                        Conversion conversion = Conversion::exact) const;

  /// The metadata value at a JSON pointer ("/hyperparameters/num_interactions"); throws
  /// FileError naming the file and the key when it is absent or not convertible to T. Numbers
  /// convert only without loss (an integer type needs an integral value in range).
  template <class T>
  T meta(const std::string& pointer) const;
  /// Whether the metadata has a value at `pointer`.
  bool has_meta(const std::string& pointer) const;

  /// `metadata["model"]`, e.g. "mace".
  std::string model_kind() const;
  /// `metadata["species"]`, in model order.
  std::vector<PotentialSpecies> species() const;
  /// The largest of `metadata["cutoffs"]` (Angstrom): what a neighbour list must cover.
  double cutoff() const;
  /// `metadata["dtype"]` as DType::F64 or DType::F32: the precision the model is meant for.
  DType compute_dtype() const;

  /// Throws FileError naming `source` unless `metadata` has every required key with the right
  /// type and value (see docs/potential-format.md), every number finite.
  void validate_metadata() const;

  /// The name errors use: `source`, or "<potential in memory>".
  std::string display_name() const;

 private:
  [[noreturn]] void fail(const std::string& what) const;
  std::map<std::string, Tensor> m_tensors;
};

/// Reads and validates a potential file (container, metadata, format version, the checksum of
/// every tensor, finite floating values). Throws FileError naming `path` and what is wrong (the
/// damaged or non-finite tensor by name); a file of a newer format version is refused with a
/// message saying to update fastmlip. A file without checksums loads with `checksummed` false.
PotentialFile read_potential_file(const std::string& path);

/// Writes `file` to `path` atomically (write_file_atomically): metadata validated first, tensors
/// ordered by element size then name so every tensor is aligned to its element size in the
/// file, each tensor's CRC-32 in the header (kChecksumKey), header padded with spaces to 8
/// bytes. Throws InputError for invalid content (a non-finite floating value among them: a file
/// that would be refused at load is never written), FileError if `path` cannot be written.
void write_potential_file(const std::string& path, const PotentialFile& file);

// ---------------------------------------------------------------------------------------
// Template definitions.

namespace detail {
/// "tensor 'name' (dtype X, shape [..])", for messages.
std::string describe_tensor(const Tensor& tensor);
/// Checks data.size() == numel * dtype_size; throws InputError naming the tensor.
void check_data_size(const Tensor& tensor);
/// Copies `count` elements of type From from `src` into `dst`, converting each to To.
template <class From, class To>
void convert_copy(const std::byte* src, std::size_t count, To* dst) {
  for (std::size_t i = 0; i < count; ++i) {
    From v;
    std::memcpy(&v, src + i * sizeof(From), sizeof(From));
    dst[i] = static_cast<To>(v);
  }
}
}  // namespace detail

template <class T>
std::vector<T> Tensor::as(Conversion conversion) const {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>,
                "Tensor::as<T>: T must be double, float or a fixed-width integer type");
  constexpr DType want = DTypeOf<T>::value;
  if (dtype != want && !(conversion == Conversion::widen && widens_to(dtype, want))) {
    throw InputError(
        "Tensor::as<" + std::string(dtype_name(want)) + ">: " + detail::describe_tensor(*this) +
        (conversion == Conversion::widen ? ", which does not convert exactly to " : ", expected dtype ") +
        dtype_name(want));
  }
  detail::check_data_size(*this);
  const std::size_t n = data.size() / dtype_size(dtype);
  std::vector<T> out(n);
  if (n == 0) {
    return out;
  }
  if (dtype == want) {
    std::memcpy(out.data(), data.data(), data.size());
    return out;
  }
  const std::byte* src = data.data();
  switch (dtype) {
    case DType::F32:
      detail::convert_copy<float>(src, n, out.data());
      break;
    case DType::I8:
      detail::convert_copy<std::int8_t>(src, n, out.data());
      break;
    case DType::I16:
      detail::convert_copy<std::int16_t>(src, n, out.data());
      break;
    case DType::I32:
      detail::convert_copy<std::int32_t>(src, n, out.data());
      break;
    case DType::U8:
      detail::convert_copy<std::uint8_t>(src, n, out.data());
      break;
    case DType::U16:
      detail::convert_copy<std::uint16_t>(src, n, out.data());
      break;
    case DType::U32:
      detail::convert_copy<std::uint32_t>(src, n, out.data());
      break;
    default:
      // widens_to() admits no other source dtype for an arithmetic target.
      throw Error("Tensor::as: internal error: no conversion from " + std::string(dtype_name(dtype)));
  }
  return out;
}

template <class T>
Tensor Tensor::from(std::string name, std::vector<std::int64_t> shape, const std::vector<T>& values) {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>,
                "Tensor::from<T>: T must be double, float or a fixed-width integer type");
  Tensor t;
  t.name = std::move(name);
  t.dtype = DTypeOf<T>::value;
  t.shape = std::move(shape);
  t.data.resize(values.size() * sizeof(T));
  if (!values.empty()) {
    std::memcpy(t.data.data(), values.data(), t.data.size());
  }
  detail::check_data_size(t);  // also rejects negative extents
  return t;
}

template <class T>
std::vector<T> PotentialFile::values(const std::string& name, const std::vector<std::int64_t>& shape,
                                     Conversion conversion) const {
  constexpr DType want = DTypeOf<T>::value;
  const Tensor& t = get(name);
  // One check_tensor call for dtype and shape together, so a mismatch names both.
  const bool dtype_fits = t.dtype == want || (conversion == Conversion::widen && widens_to(t.dtype, want));
  check_tensor(t, {dtype_fits ? t.dtype : want}, shape, display_name());
  return t.as<T>(conversion);
}

namespace detail {
/// Converts a metadata value to T without loss; returns false if it cannot.
template <class T>
bool json_to(const nlohmann::json& j, T& out) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!j.is_boolean()) {
      return false;
    }
    out = j.get<bool>();
    return true;
  } else if constexpr (std::is_integral_v<T>) {
    if (j.is_number_unsigned()) {
      const auto v = j.get<std::uint64_t>();
      if (v > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) {
        return false;
      }
      out = static_cast<T>(v);
      return true;
    }
    if (j.is_number_integer()) {
      const auto v = j.get<std::int64_t>();
      if constexpr (std::is_unsigned_v<T>) {
        return false;  // only negative values are stored as number_integer
      } else {
        if (v < static_cast<std::int64_t>(std::numeric_limits<T>::min()) ||
            v > static_cast<std::int64_t>(std::numeric_limits<T>::max())) {
          return false;
        }
        out = static_cast<T>(v);
        return true;
      }
    }
    return false;
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!j.is_number()) {
      return false;
    }
    const double v = j.get<double>();
    // A double beyond float's range would become inf: refuse rather than change the value.
    if (v > static_cast<double>(std::numeric_limits<T>::max()) ||
        v < -static_cast<double>(std::numeric_limits<T>::max())) {
      return false;
    }
    out = static_cast<T>(v);
    return true;
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!j.is_string()) {
      return false;
    }
    out = j.get<std::string>();
    return true;
  } else {
    try {
      out = j.get<T>();
      return true;
    } catch (const nlohmann::json::exception&) {
      return false;
    }
  }
}
/// The value at `pointer` or nullptr; throws InputError for a malformed pointer.
const nlohmann::json* find_meta(const nlohmann::json& metadata, const std::string& pointer);
/// A value as JSON text for a message, cut to a readable length.
std::string json_excerpt(const nlohmann::json& value);
}  // namespace detail

template <class T>
T PotentialFile::meta(const std::string& pointer) const {
  const nlohmann::json* j = detail::find_meta(metadata, pointer);
  if (j == nullptr) {
    fail("metadata has no '" + pointer +
         "' (the model needs it; the file is incomplete or for another model)");
  }
  T out{};
  if (!detail::json_to(*j, out)) {
    fail("metadata '" + pointer + "' = " + detail::json_excerpt(*j) +
         " has the wrong type or range for this model");
  }
  return out;
}

}  // namespace fastmlip::io
