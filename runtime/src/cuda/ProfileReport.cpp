//===- ProfileReport.cpp - the text of a KILN_CUDA_PROFILE file ----------===//

#include "ProfileReport.h"

#include "kiln/runtime/Status.h"

#include <algorithm>
#include <cstdio>
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

std::string profileReport(const std::string &entryName,
                          const std::vector<ProfiledCommand> &commands,
                          const std::vector<double> &totalMs, double runMs,
                          uint64_t runs) {
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
    // Gemm, attention and layer-norm commands name themselves ("gemm (m
    // ...)", "attention backward (...)", "layer norm 8192x768 ..."); a
    // kernel's name gets its kind in front.
    const ProfiledCommand &command = commands[i];
    if (command.kind == "kernel")
      byWhat.emplace_back(strCat("kernel ", command.what), totalMs[i] * perRun);
    else if (!command.what.empty())
      byWhat.emplace_back(command.what, totalMs[i] * perRun);
  }
  out += "\n  by kind:\n      ms/run       %  commands  kind\n";
  for (const auto &[kind, ms, count] : sumBy(byKind))
    out += formatRow(ms, inCommands, std::to_string(count), kind);

  std::vector<std::tuple<std::string, double, size_t>> groups = sumBy(byWhat);
  out += strCat("\n  by kernel or shape (the ", kLongestGroups, " longest of ",
                groups.size(),
                "):\n      ms/run       %  commands  kernel, "
                "gemm, attention or layer norm\n");
  for (size_t i = 0; i < groups.size() && i < kLongestGroups; ++i)
    out += formatRow(std::get<1>(groups[i]), inCommands,
                     std::to_string(std::get<2>(groups[i])),
                     std::get<0>(groups[i]));

  std::vector<size_t> order(commands.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return totalMs[a] > totalMs[b]; });
  out +=
      strCat("\n  by command (the ", kLongestCommands, " longest of ",
             commands.size(), "):\n      ms/run       %            command\n");
  for (size_t i = 0; i < order.size() && i < kLongestCommands; ++i)
    out += formatRow(totalMs[order[i]] * perRun, inCommands, "",
                     commands[order[i]].description);
  return out;
}

std::string profileText(const std::string &header,
                        const std::vector<std::string> &reports) {
  std::string text = header;
  for (const std::string &report : reports)
    text += "\n" + report;
  return text;
}

} // namespace kiln::runtime::cuda
