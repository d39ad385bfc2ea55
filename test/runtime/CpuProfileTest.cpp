//===- CpuProfileTest.cpp - the text of a KILN_CPU_PROFILE report ---------===//
//
// The report kiln-profile-marks' table and slots give, on a made-up table
// whose rates are round numbers: a 2 ms product of 4 GFLOP reads 40 GFLOP/s,
// a 1 ms kernel moving 8 MB reads 8 GB/s.
//
//===----------------------------------------------------------------------===//

#include "cpu/CpuProfile.h"

#include <gtest/gtest.h>

#include <string>

using namespace kiln::runtime;

namespace {

const char *kTable = "kiln-cpu-profile 1\n"
                     "step\tgemm\t8000000\t3000000\t1000000\tsgemm 10x20x30\t"
                     "/fc/Gemm\n"
                     "step\tkernel\t2000000\t6000000\t2000000\tlinalg.generic "
                     "1000 (exp)\t/act\n"
                     "step\tcollective\t0\t0\t0\tkiln_collective_wait\t\n"
                     "eval\tkernel\t0\t16\t16\tcopy 16 B\t\n";

TEST(CpuProfileTest, ReportsTimesBytesAndRatesPerEntryPoint) {
  // Two runs of `step`: 4 ms in the product, 2 ms in the kernel, 2 ms
  // waiting; `eval` never ran. Kinds of equal time come by name; commands
  // of equal time in table order.
  int64_t slots[1 + 2 * 4] = {0, 4000000, 2, 2000000, 2, 2000000, 2, 0, 0};
  std::string report;
  ASSERT_TRUE(cpuProfileReport("code", kTable, slots, report).ok());
  EXPECT_EQ(
      report,
      "entry point 'step': 2 runs, 4.000 ms per run in 3 commands\n"
      "  by kind:\n"
      "    ms/run   share    MB/run      GB/s  GFLOP/s  commands  kind\n"
      "     2.000  50.00%     4.000      2.00     4.00         1  gemm\n"
      "     1.000  25.00%         -         -        -         1  "
      "collective\n"
      "     1.000  25.00%     8.000      8.00     2.00         1  kernel\n"
      "  the 40 longest commands:\n"
      "    ms/run   share    MB/run      GB/s  GFLOP/s  kind        what\n"
      "     2.000  50.00%     4.000      2.00     4.00  gemm        sgemm "
      "10x20x30  [/fc/Gemm]\n"
      "     1.000  25.00%     8.000      8.00     2.00  kernel      "
      "linalg.generic 1000 (exp)  [/act]\n"
      "     1.000  25.00%         -         -        -  collective  "
      "kiln_collective_wait\n"
      "  the 20 kernels moving the most bytes:\n"
      "    ms/run   share    MB/run      GB/s  GFLOP/s  kind        what\n"
      "     1.000  25.00%     8.000      8.00     2.00  kernel      "
      "linalg.generic 1000 (exp)  [/act]\n"
      "\n");
}

TEST(CpuProfileTest, RefusesATableInAnotherFormat) {
  int64_t slots[3] = {0, 0, 0};
  std::string report;
  Status status =
      cpuProfileReport("code", "kiln-cpu-profile 2\n", slots, report);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("does not start with 'kiln-cpu-profile 1'"),
            std::string::npos);
  status = cpuProfileReport("code",
                            "kiln-cpu-profile 1\nstep\tkernel\tx\t1\t1\ta\tb\n",
                            slots, report);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("code: line 2 of the profile table"),
            std::string::npos);
}

} // namespace
