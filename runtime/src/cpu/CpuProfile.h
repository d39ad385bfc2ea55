//===- CpuProfile.h - the report of KILN_CPU_PROFILE ------------*- C++ -*-===//
//
// A bundle's CPU code times its own commands (kiln/abi/profile.h); this is
// what the runtime makes of the times: per entry point, the time by kind and
// the longest commands, each with the bytes it moves and its floating-point
// work per run, and the rates those give.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SRC_CPU_CPUPROFILE_H
#define KILN_RUNTIME_SRC_CPU_CPUPROFILE_H

#include "kiln/runtime/Status.h"

#include <cstdint>
#include <string>

namespace kiln::runtime {

/// Whether KILN_CPU_PROFILE named a file when libkilnrt was loaded.
bool cpuProfileEnabled();

/// The report of one code object: `table` is its kiln_cpu_profile_table
/// (kiln-profile-marks' format), `slots` its kiln_cpu_profile_slots, `what`
/// names it. Entry points that never ran are left out. An error when the
/// table is not in that format.
Status cpuProfileReport(const std::string &what, const char *table,
                        const int64_t *slots, std::string &out);

/// Writes `report` to the KILN_CPU_PROFILE file (a `%p` in its name becomes
/// the process id): the process's first report replaces the file, later ones
/// (other sessions) are appended. A failure is printed on stderr.
void writeCpuProfile(const std::string &report);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_SRC_CPU_CPUPROFILE_H
