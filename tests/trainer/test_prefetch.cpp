// SPDX-License-Identifier: MIT
// Prefetcher (--prefetch): the same items in the same order at every depth, the builder's
// exception on the consumer's thread with its message, no hang when the consumer stops early,
// and a thread the system cannot start as an error that says what to do.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "../common/memory_limit.hpp"
#include "core/error.hpp"
#include "train/prefetch.hpp"

namespace fastmlip::trainer::train {
namespace {

TEST(Prefetch, SameItemsInOrderAtEveryDepth) {
  for (std::size_t depth : {0u, 1u, 2u, 5u}) {
    std::atomic<int> built{0};
    Prefetcher<std::vector<int>> p(7, depth, [&](std::size_t i) {
      ++built;
      return std::vector<int>(i, static_cast<int>(i * i));
    });
    for (std::size_t i = 0; i < 7; ++i) {
      EXPECT_EQ(p.next(), std::vector<int>(i, static_cast<int>(i * i))) << "depth " << depth;
    }
    EXPECT_EQ(built.load(), 7);
    EXPECT_THROW(p.next(), Error);
  }
}

TEST(Prefetch, BuilderRunsAheadByAtMostTheDepth) {
  std::atomic<int> built{0};
  Prefetcher<int> p(10, 2, [&](std::size_t i) {
    ++built;
    return static_cast<int>(i);
  });
  EXPECT_EQ(p.next(), 0);
  // Item 0 taken: items 1 and 2 may be waiting and item 3 being built, never more.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_LE(built.load(), 4);
}

TEST(Prefetch, BuilderExceptionReachesTheConsumerWithItsMessage) {
  for (std::size_t depth : {0u, 2u}) {
    Prefetcher<int> p(6, depth, [](std::size_t i) {
      if (i == 3) {
        throw InputError("data.xyz: frame 4: no 'REF_forces' label");
      }
      return static_cast<int>(i);
    });
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(p.next(), i);
    }
    try {
      p.next();
      ADD_FAILURE() << "no exception at depth " << depth;
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()), "data.xyz: frame 4: no 'REF_forces' label");
    }
  }
}

TEST(Prefetch, ConsumerLeavingEarlyJoinsTheThread) {
  std::atomic<int> built{0};
  {
    Prefetcher<int> p(1000, 2, [&](std::size_t i) {
      ++built;
      return static_cast<int>(i);
    });
    EXPECT_EQ(p.next(), 0);
  }  // the destructor stops the builder, which waits for room in the queue
  EXPECT_LE(built.load(), 4);
  {
    Prefetcher<int> untouched(3, 1, [](std::size_t i) { return static_cast<int>(i); });
  }
}

TEST(Prefetch, AThreadTheSystemCannotStartSaysWhatToDo) {
  if (test::kSanitized) {
    GTEST_SKIP() << "the sanitizers' own reservations defeat an address-space limit";
  }
  // In a child whose address space can grow by 1 MiB, less than a thread's stack (8 MiB): first
  // threads that never end take the stacks glibc keeps from joined threads, until one cannot
  // start; then the Prefetcher's thread cannot start either.
  const auto child = test::run_with_memory_headroom(
      [] {
        for (int k = 0; k < 64; ++k) {
          try {
            std::thread([] {
              for (;;) {
                pause();
              }
            }).detach();
          } catch (const std::system_error&) {
            Prefetcher<int> p(3, 1, [](std::size_t i) { return static_cast<int>(i); });
            return;
          }
        }
      },
      std::size_t{1} << 20);
  ASSERT_EQ(child.code, 0) << child.message;
  EXPECT_NE(child.message.find("--prefetch thread"), std::string::npos) << child.message;
  EXPECT_NE(child.message.find("--prefetch 0"), std::string::npos) << child.message;
  // Without the limit the same Prefetcher starts.
  Prefetcher<int> p(3, 1, [](std::size_t i) { return static_cast<int>(i); });
  EXPECT_EQ(p.next(), 0);
}

}  // namespace
}  // namespace fastmlip::trainer::train
