//===- Profile.cpp - device time of each command of an entry point --------===//

#include "Profile.h"

#include "CudaErrors.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <tuple>

namespace kiln::runtime::cuda {

namespace {

/// The longest rows each table of the report shows.
constexpr size_t kLongestCommands = 40;
constexpr size_t kLongestGroups = 30;

std::string formatRow(double ms, double total, const std::string &count,
                      const std::string &what) {
  char prefix[64];
  std::snprintf(prefix, sizeof(prefix), "  %10.3f %6.1f%%  %8s  ", ms,
                total > 0 ? 100.0 * ms / total : 0.0, count.c_str());
  return strCat(prefix, what, "\n");
}

/// Sums `ms` by `key`, sorted by the sum, longest first: (key, sum, count).
std::vector<std::tuple<std::string, double, size_t>>
sumBy(const std::vector<std::pair<std::string, double>> &items) {
  std::map<std::string, std::pair<double, size_t>> sums;
  for (const auto &[key, ms] : items) {
    sums[key].first += ms;
    ++sums[key].second;
  }
  std::vector<std::tuple<std::string, double, size_t>> rows;
  for (const auto &[key, sum] : sums)
    rows.emplace_back(key, sum.first, sum.second);
  std::stable_sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
    return std::get<1>(a) > std::get<1>(b);
  });
  return rows;
}

} // namespace

Status CommandProfile::create(std::string entryName,
                              std::vector<Command> commands,
                              std::unique_ptr<CommandProfile> &out) {
  std::unique_ptr<CommandProfile> profile(new CommandProfile());
  profile->entryName = std::move(entryName);
  profile->commands = std::move(commands);
  size_t count = profile->commands.size();
  for (const Command &command : profile->commands)
    profile->timed.push_back(command.kind != "collectives");
  profile->totalMs.assign(count, 0.0);
  for (size_t i = 0; i < 2 * count + 2; ++i) {
    CUevent event = nullptr;
    KILN_RETURN_IF_ERROR(
        checkCu(cuEventCreate(&event, CU_EVENT_DEFAULT), "cuEventCreate")
            .withContext("creating the profile's events"));
    profile->events.push_back(event);
  }
  out = std::move(profile);
  return Status();
}

CommandProfile::~CommandProfile() {
  for (CUevent event : events)
    cuEventDestroy(event);
}

Status CommandProfile::beginRun(CUstream stream) {
  return checkCu(cuEventRecord(events[2 * commands.size()], stream),
                 "cuEventRecord");
}

Status CommandProfile::endRun(CUstream stream) {
  return checkCu(cuEventRecord(events[2 * commands.size() + 1], stream),
                 "cuEventRecord");
}

Status CommandProfile::begin(size_t index, CUstream stream) {
  if (!timed[index])
    return Status();
  return checkCu(cuEventRecord(events[2 * index], stream), "cuEventRecord");
}

Status CommandProfile::end(size_t index, CUstream stream) {
  if (!timed[index])
    return Status();
  return checkCu(cuEventRecord(events[2 * index + 1], stream),
                 "cuEventRecord");
}

Status CommandProfile::accumulate() {
  float ms = 0;
  for (size_t i = 0; i < commands.size(); ++i) {
    if (!timed[i])
      continue;
    KILN_RETURN_IF_ERROR(
        checkCu(cuEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]),
                "cuEventElapsedTime")
            .withContext(strCat("profiling ", commands[i].description)));
    totalMs[i] += ms;
  }
  size_t run = 2 * commands.size();
  KILN_RETURN_IF_ERROR(
      checkCu(cuEventElapsedTime(&ms, events[run], events[run + 1]),
              "cuEventElapsedTime")
          .withContext("profiling the run"));
  runMs += ms;
  ++runs;
  return Status();
}

std::string CommandProfile::report() const {
  std::string out = strCat("entry point '", entryName, "': ", runs,
                           " run(s) timed, the first run left out\n");
  if (runs == 0)
    return out;
  double perRun = 1.0 / static_cast<double>(runs);
  double inCommands =
      std::accumulate(totalMs.begin(), totalMs.end(), 0.0) * perRun;
  char line[160];
  std::snprintf(line, sizeof(line),
                "  per run: %.3f ms on the stream from the first command to "
                "the last, %.3f ms (%.1f%%) inside the commands\n",
                runMs * perRun, inCommands,
                runMs > 0 ? 100.0 * inCommands / (runMs * perRun) : 0.0);
  out += line;
  out += "  (percentages are of the time inside the commands)\n";

  std::vector<std::pair<std::string, double>> byKind, byWhat;
  for (size_t i = 0; i < commands.size(); ++i) {
    byKind.emplace_back(commands[i].kind, totalMs[i] * perRun);
    if (commands[i].kind == "kernel" || commands[i].kind == "gemm")
      byWhat.emplace_back(
          strCat(commands[i].kind, " ", commands[i].what), totalMs[i] * perRun);
  }
  out += "\n  by kind:\n      ms/run       %  commands  kind\n";
  for (const auto &[kind, ms, count] : sumBy(byKind))
    out += formatRow(ms, inCommands, std::to_string(count), kind);

  std::vector<std::tuple<std::string, double, size_t>> groups = sumBy(byWhat);
  out += strCat("\n  by kernel or gemm shape (the ", kLongestGroups,
                " longest of ", groups.size(),
                "):\n      ms/run       %  commands  kernel or gemm\n");
  for (size_t i = 0; i < groups.size() && i < kLongestGroups; ++i)
    out += formatRow(std::get<1>(groups[i]), inCommands,
                     std::to_string(std::get<2>(groups[i])),
                     std::get<0>(groups[i]));

  std::vector<size_t> order(commands.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return totalMs[a] > totalMs[b];
  });
  out += strCat("\n  by command (the ", kLongestCommands, " longest of ",
                commands.size(), "):\n      ms/run       %            command\n");
  for (size_t i = 0; i < order.size() && i < kLongestCommands; ++i)
    out += formatRow(totalMs[order[i]] * perRun, inCommands, "",
                     commands[order[i]].description);
  return out;
}

Status writeProfile(const std::string &path, const std::string &header,
                    const std::vector<const CommandProfile *> &profiles) {
  std::string text = header;
  for (const CommandProfile *profile : profiles)
    text += "\n" + profile->report();
  std::FILE *file = std::fopen(path.c_str(), "w");
  if (!file)
    return ioError("KILN_CUDA_PROFILE: cannot write '", path,
                   "': ", std::strerror(errno));
  bool written = std::fwrite(text.data(), 1, text.size(), file) == text.size();
  if (std::fclose(file) != 0 || !written)
    return ioError("KILN_CUDA_PROFILE: writing '", path,
                   "' failed: ", std::strerror(errno));
  return Status();
}

} // namespace kiln::runtime::cuda
