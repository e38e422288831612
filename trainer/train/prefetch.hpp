// SPDX-License-Identifier: MIT
#pragma once
/// \file Building the next batches on a background thread while the current one trains
/// (--prefetch).
///
/// A Prefetcher hands out items 0, 1, ..., count-1 in order. With depth 0 next() builds each
/// item on the caller's thread; with depth d > 0 one background thread builds them ahead, at
/// most d finished items waiting. The items are the same either way (the same function builds
/// them in the same order), so prefetching cannot change a result. An exception in the builder
/// reaches the caller from the next() that would have returned that item, with its message;
/// the items before it are delivered first. The destructor stops the thread and joins it, also
/// when the consumer leaves early by an exception of its own. A thread the system cannot start
/// (short of memory or of threads) is a ResourceError that says what to do.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "core/error.hpp"

namespace fastmlip::trainer::train {

template <class Item>
class Prefetcher {
 public:
  /// `build(i)` makes item i; it must not call MPI (it may run on another thread).
  Prefetcher(std::size_t count, std::size_t depth, std::function<Item(std::size_t)> build)
      : m_count(count), m_depth(depth), m_build(std::move(build)) {
    if (m_depth > 0 && m_count > 0) {
      try {
        m_thread = std::thread([this] { produce(); });
      } catch (const std::system_error& e) {
        // std::thread's words alone ("Resource temporarily unavailable") name neither the
        // thread nor a way out.
        throw ResourceError(
            std::string("train-potential: the --prefetch thread, which builds the next batches, "
                        "could not start (") +
            e.what() +
            "): the process is short of memory or threads (ulimit -v, ulimit -u). Give it more, "
            "or use --prefetch 0 to build each batch on the training thread.");
      }
    }
  }
  ~Prefetcher() {
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_stop = true;
    }
    m_cv.notify_all();
    if (m_thread.joinable()) {
      m_thread.join();
    }
  }
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  /// The next item; rethrows the builder's exception for it. Throws Error past the last item.
  Item next() {
    if (m_taken >= m_count) {
      throw Error("Prefetcher::next: all " + std::to_string(m_count) + " items were taken");
    }
    if (m_depth == 0) {
      return m_build(m_taken++);
    }
    std::unique_lock<std::mutex> lock(m_mutex);
    m_cv.wait(lock, [this] { return !m_ready.empty() || m_error; });
    if (m_ready.empty()) {
      std::rethrow_exception(m_error);
    }
    Item item = std::move(m_ready.front());
    m_ready.pop_front();
    ++m_taken;
    lock.unlock();
    m_cv.notify_all();
    return item;
  }

 private:
  void produce() {
    for (std::size_t i = 0; i < m_count; ++i) {
      {
        std::unique_lock<std::mutex> lock(m_mutex);
        m_cv.wait(lock, [this] { return m_stop || m_ready.size() < m_depth; });
        if (m_stop) {
          return;
        }
      }
      try {
        Item item = m_build(i);
        std::lock_guard<std::mutex> lock(m_mutex);
        m_ready.push_back(std::move(item));
      } catch (...) {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_error = std::current_exception();
      }
      m_cv.notify_all();
      if (m_error) {
        return;
      }
    }
  }

  const std::size_t m_count, m_depth;
  const std::function<Item(std::size_t)> m_build;
  std::size_t m_taken = 0;  // consumer side only
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::deque<Item> m_ready;
  std::exception_ptr m_error;
  bool m_stop = false;
  std::thread m_thread;  // last: started after every other member exists
};

}  // namespace fastmlip::trainer::train
