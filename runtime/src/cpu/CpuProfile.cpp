//===- CpuProfile.cpp - the CPU step's profile marks and its file ---------===//

#include "cpu/CpuProfile.h"

#include "kiln/abi/profile.h"

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <unistd.h>

using namespace kiln::runtime;

namespace {

/// Read once, as the library loads: a mark then costs one branch.
const bool kEnabled = [] {
  const char *path = std::getenv("KILN_CPU_PROFILE");
  return path && *path;
}();

int64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

} // namespace

extern "C" void kiln_cpu_profile_start(int64_t *slots) {
  if (!kEnabled)
    return;
  slots[0] = nowNs();
}

extern "C" void kiln_cpu_profile_mark(int64_t *slots, int32_t id) {
  if (!kEnabled)
    return;
  int64_t now = nowNs();
  slots[1 + 2 * int64_t(id)] += now - slots[0];
  slots[2 + 2 * int64_t(id)] += 1;
  slots[0] = now;
}

bool kiln::runtime::cpuProfileEnabled() { return kEnabled; }

void kiln::runtime::writeCpuProfile(const std::string &report) {
  static std::mutex mutex;
  static bool written = false;
  std::lock_guard<std::mutex> lock(mutex);
  std::string path = std::getenv("KILN_CPU_PROFILE");
  size_t pid = path.find("%p");
  if (pid != std::string::npos)
    path.replace(pid, 2, std::to_string(getpid()));
  FILE *file = std::fopen(path.c_str(), written ? "a" : "w");
  if (!file) {
    std::fprintf(stderr, "kiln: cannot write the CPU profile '%s'\n",
                 path.c_str());
    return;
  }
  written = true;
  bool ok = std::fwrite(report.data(), 1, report.size(), file) == report.size();
  ok = std::fclose(file) == 0 && ok;
  if (!ok)
    std::fprintf(stderr, "kiln: writing the CPU profile '%s' failed\n",
                 path.c_str());
}
