// SPDX-License-Identifier: MIT
// The models' per-layer exchange through host rows (models/exchange_on_host.hpp), on rows in the
// memory of Kokkos' default execution space (a GPU's in a Kokkos-CUDA build, where the models
// stage every exchange this way; the host's in CI): the host copy that moves only the rows the
// exchange reads, and back only those it writes, gives what the exchange gives on the rows
// themselves, for the forward and reverse exchanges of FeatureExchange's contract and for rows of
// another layout; odd sizes, float and double.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <vector>

#include "models/exchange_on_host.hpp"

namespace fastmlip::test {
namespace {

using Device = Kokkos::DefaultExecutionSpace;
using models::ExchangeRows;

constexpr int kLocal = 7, kTotal = 19, kWidth = 5;

/// A rank's exchange with itself: ghost g's owner is local node (3 g) mod kLocal.
int owner(int g) { return (3 * g) % kLocal; }

template <class T>
void forward(T* rows) {
  for (int g = kLocal; g < kTotal; ++g) {
    for (int k = 0; k < kWidth; ++k) {
      rows[g * kWidth + k] = rows[owner(g) * kWidth + k];
    }
  }
}
template <class T>
void reverse(T* rows) {
  for (int g = kLocal; g < kTotal; ++g) {
    for (int k = 0; k < kWidth; ++k) {
      rows[owner(g) * kWidth + k] += rows[g * kWidth + k];
      rows[g * kWidth + k] = T(0);
    }
  }
}
/// An exchange of rows of another layout (CHGNet's slots): reads and writes every row.
template <class T>
void mix(T* rows) {
  for (int i = 0; i < kTotal; ++i) {
    for (int k = 0; k < kWidth; ++k) {
      rows[i * kWidth + k] =
          T(2) * rows[i * kWidth + k] + rows[((i + 5) % kTotal) * kWidth + (k + 1) % kWidth];
    }
  }
}

template <class T>
class ExchangeOnHost : public ::testing::Test {};
using Dtypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(ExchangeOnHost, Dtypes);

TYPED_TEST(ExchangeOnHost, HostCopyGivesTheExchangeOnTheRows) {
  using T = TypeParam;
  using Rows = Kokkos::View<T**, Kokkos::LayoutRight, Device::memory_space>;
  kernels::impl::GrowBuffer<T, Kokkos::HostSpace> staging("test::exchange_staging");
  for (const ExchangeRows what : {ExchangeRows::forward, ExchangeRows::reverse, ExchangeRows::any}) {
    for (const bool staged : {true, false}) {
      // Values, with the ghost rows of a forward exchange set to what they must not keep.
      std::vector<T> start(kTotal * kWidth);
      for (int i = 0; i < kTotal * kWidth; ++i) {
        start[i] = T(0.25) * T(i % 11) - T(1) + T(i) / T(64);
        if (what == ExchangeRows::forward && i >= kLocal * kWidth) {
          start[i] = T(-999);
        }
      }
      std::vector<T> expected = start;
      const auto run = [&](T* rows) {
        if (what == ExchangeRows::forward) {
          forward(rows);
        } else if (what == ExchangeRows::reverse) {
          reverse(rows);
        } else {
          mix(rows);
        }
      };
      run(expected.data());

      Rows rows("test::rows", kTotal, kWidth);
      const auto host_start =
          Kokkos::View<T**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
              start.data(), kTotal, kWidth);
      Kokkos::deep_copy(rows, host_start);
      // The staging buffer holds stale values from the previous case, as between a model's layers.
      if (staged) {
        models::exchange_through_host_copy(rows, kLocal, what, staging, run);
      } else {
        models::exchange_on_host(rows, kLocal, what, staging, run);
      }
      const auto got = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), rows);
      for (int i = 0; i < kTotal; ++i) {
        for (int k = 0; k < kWidth; ++k) {
          EXPECT_EQ(got(i, k), expected[i * kWidth + k])
              << (staged ? "host copy" : "exchange_on_host") << ", exchange " << static_cast<int>(what)
              << ", row " << i << (i < kLocal ? " (local)" : " (ghost)") << ", column " << k;
        }
      }
    }
  }
}

}  // namespace
}  // namespace fastmlip::test
