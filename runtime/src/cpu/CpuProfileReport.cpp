//===- CpuProfileReport.cpp - the text of a KILN_CPU_PROFILE file ---------===//
//
// Apart from the marks (CpuProfile.cpp) so that the report is tested on a
// made-up table (test/runtime/CpuProfileTest.cpp).
//
//===----------------------------------------------------------------------===//

#include "cpu/CpuProfile.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

using namespace kiln::runtime;

namespace {

struct Row {
  std::string entry, kind, what, where;
  int64_t flops = 0, read = 0, written = 0;
  int64_t ns = 0, count = 0;
};

/// The pieces of `text` between `separator`s (one more than there are).
std::vector<std::string> split(const std::string &text, char separator) {
  std::vector<std::string> pieces;
  size_t start = 0;
  while (true) {
    size_t end = text.find(separator, start);
    pieces.push_back(text.substr(start, end - start));
    if (end == std::string::npos)
      return pieces;
    start = end + 1;
  }
}

bool parseCount(const std::string &text, int64_t &out) {
  if (text.empty() || text.size() > 18 ||
      text.find_first_not_of("0123456789") != std::string::npos)
    return false;
  out = std::stoll(text);
  return true;
}

/// `value` with `decimals` decimals right-aligned in `width` columns, or "-"
/// when `known` is false.
std::string column(double value, int width, bool known = true,
                   int decimals = 2) {
  char buffer[64];
  if (known)
    std::snprintf(buffer, sizeof(buffer), "%*.*f", width, decimals, value);
  else
    std::snprintf(buffer, sizeof(buffer), "%*s", width, "-");
  return buffer;
}

/// One line of a table: time per run, share of the entry's time, megabytes
/// moved per run, and the rates, "-" where a command moves or computes
/// nothing the table knows of.
std::string figures(int64_t ns, int64_t runs, int64_t totalNs, int64_t bytes,
                    int64_t flops) {
  double perRunNs = double(ns) / runs;
  return column(perRunNs / 1e6, 10, true, 3) +
         column(totalNs > 0 ? 100.0 * ns / totalNs : 0.0, 7) + "%" +
         column(bytes / 1e6, 10, bytes > 0, 3) +
         column(bytes / perRunNs, 10, bytes > 0 && perRunNs > 0) +
         column(flops / perRunNs, 9, flops > 0 && perRunNs > 0);
}

} // namespace

Status kiln::runtime::cpuProfileReport(const std::string &what,
                                       const char *table, const int64_t *slots,
                                       std::string &out) {
  // One line per command after the header, each ending in a newline.
  std::vector<std::string> lines = split(table, '\n');
  if (lines.back().empty())
    lines.pop_back();
  if (lines.empty() || lines[0] != "kiln-cpu-profile 1")
    return formatError(what, ": the profile table does not start with "
                             "'kiln-cpu-profile 1'");
  // Entries in the order the table names them.
  std::vector<std::string> entries;
  std::map<std::string, std::vector<Row>> rows;
  for (size_t i = 1; i < lines.size(); ++i) {
    Row row;
    int64_t id = static_cast<int64_t>(i) - 1;
    std::vector<std::string> fields = split(lines[i], '\t');
    if (fields.size() != 7 || !parseCount(fields[2], row.flops) ||
        !parseCount(fields[3], row.read) || !parseCount(fields[4], row.written))
      return formatError(what, ": line ", i + 1,
                         " of the profile table is not 7 tab-separated "
                         "fields (entry, kind, flops, read, written, what, "
                         "where)");
    row.entry = fields[0];
    row.kind = fields[1];
    row.what = fields[5];
    row.where = fields[6];
    row.ns = slots[1 + 2 * id];
    row.count = slots[2 + 2 * id];
    if (!rows.count(row.entry))
      entries.push_back(row.entry);
    rows[row.entry].push_back(std::move(row));
  }

  for (const std::string &entry : entries) {
    std::vector<Row> &commands = rows[entry];
    int64_t runs = 0, totalNs = 0;
    for (const Row &row : commands) {
      runs = std::max(runs, row.count);
      totalNs += row.ns;
    }
    if (runs == 0)
      continue;
    double perRun = double(totalNs) / runs;
    out += "entry point '" + entry + "': " + std::to_string(runs) + " runs, " +
           column(perRun / 1e6, 0, true, 3) + " ms per run in " +
           std::to_string(commands.size()) + " commands\n";
    const char *columns = "    ms/run   share    MB/run      GB/s  GFLOP/s";

    // By kind, longest first.
    std::map<std::string, Row> kinds;
    for (const Row &row : commands) {
      Row &sum = kinds[row.kind];
      sum.kind = row.kind;
      sum.ns += row.ns;
      sum.read += row.read;
      sum.written += row.written;
      sum.flops += row.flops;
      ++sum.count;
    }
    std::vector<Row> byKind;
    for (auto &[kind, sum] : kinds)
      byKind.push_back(sum);
    std::sort(byKind.begin(), byKind.end(), [](const Row &a, const Row &b) {
      return a.ns != b.ns ? a.ns > b.ns : a.kind < b.kind;
    });
    out += std::string("  by kind:\n") + columns + "  commands  kind\n";
    for (const Row &sum : byKind)
      out += figures(sum.ns, runs, totalNs, sum.read + sum.written, sum.flops) +
             column(sum.count, 10, true, 0) + "  " + sum.kind + "\n";

    auto list = [&](const char *title, std::vector<const Row *> order,
                    size_t limit) {
      out += std::string(title) + ":\n" + columns + "  kind        what\n";
      for (size_t i = 0; i < order.size() && i < limit; ++i) {
        const Row &row = *order[i];
        std::string kind = row.kind;
        kind.resize(std::max<size_t>(kind.size(), 10), ' ');
        out +=
            figures(row.ns, runs, totalNs, row.read + row.written, row.flops) +
            "  " + kind + "  " + row.what +
            (row.where.empty() ? "" : "  [" + row.where + "]") + "\n";
      }
    };
    std::vector<const Row *> order;
    for (const Row &row : commands)
      order.push_back(&row);
    // Ties in table order: the rows are one vector's elements.
    std::sort(order.begin(), order.end(), [](const Row *a, const Row *b) {
      return a->ns != b->ns ? a->ns > b->ns : a < b;
    });
    list("  the 40 longest commands", order, 40);
    // The memory-bound ones: the kernels that move the most bytes, with the
    // rate they reach.
    std::vector<const Row *> kernels;
    for (const Row &row : commands)
      if (row.kind == "kernel" && row.read + row.written > 0)
        kernels.push_back(&row);
    std::sort(kernels.begin(), kernels.end(), [](const Row *a, const Row *b) {
      int64_t aBytes = a->read + a->written, bBytes = b->read + b->written;
      return aBytes != bBytes ? aBytes > bBytes : a < b;
    });
    list("  the 20 kernels moving the most bytes", kernels, 20);
    out += "\n";
  }
  return Status();
}
