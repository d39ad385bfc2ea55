//===- HostBarrier.h - a barrier for kernels on host threads ---*- C++ -*-===//
//
// The tests that run the runtime's CUDA kernels on the host, every thread
// of a block a thread of its own, stand in for __syncthreads and the warp's
// exchanges with this.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_RUNTIME_HOSTBARRIER_H
#define KILN_TEST_RUNTIME_HOSTBARRIER_H

#include <condition_variable>
#include <mutex>

namespace kiln::runtime::testing {

/// Threads wait here until `count` of them have arrived (C++17 has no
/// std::barrier).
class Barrier {
public:
  explicit Barrier(int count) : count(count) {}
  void arriveAndWait() {
    std::unique_lock<std::mutex> lock(mutex);
    int arrival = generation;
    if (++waiting == count) {
      waiting = 0;
      ++generation;
      done.notify_all();
      return;
    }
    done.wait(lock, [&] { return generation != arrival; });
  }

private:
  std::mutex mutex;
  std::condition_variable done;
  int count, waiting = 0, generation = 0;
};

} // namespace kiln::runtime::testing

#endif // KILN_TEST_RUNTIME_HOSTBARRIER_H
