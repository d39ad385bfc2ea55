//===- ProfileReportTest.cpp - the text of a KILN_CUDA_PROFILE file -------===//
//
// The CUDA backend's profile report for fixed command times, without a GPU:
// the per-run figures, the tables by kind, by kernel or shape and by
// command, each sorted longest first and cut at its length. The whole text
// must equal test/bench/profile-sample.txt, the file bench/gpu_train.py's
// profile parser is tested on (test/bench/gpu-train-profile.test), so the
// writer and the reader cannot drift apart unseen. After an intended change
// of the format, the test writes what it made beside the build's test files
// for the sample to be replaced with.
//
//===----------------------------------------------------------------------===//

#include "cuda/ProfileReport.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

using kiln::runtime::cuda::ProfiledCommand;
using kiln::runtime::cuda::profileReport;
using kiln::runtime::cuda::profileText;

ProfiledCommand kernel(int index, const std::string &name, int grid) {
  return {"kernel", name,
          "command " + std::to_string(index) + " (kernel '" + name +
              "') grid " + std::to_string(grid) + "x1x1 block 256x1x1"};
}

ProfiledCommand named(const std::string &kind, int index,
                      const std::string &what) {
  return {kind, what, "command " + std::to_string(index) + " (" + what + ")"};
}

ProfiledCommand unnamed(const std::string &kind, int index,
                        const std::string &what) {
  return {kind, "", "command " + std::to_string(index) + " (" + what + ")"};
}

std::string readFile(const std::string &path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// A training step's commands, times summed over two runs (quarters of a
/// millisecond, so every figure prints exactly), and a forward's.
std::string sampleText() {
  const std::string qkv = "gemm (m 8192, n 2304, k 768, batch 1, bf16 x bf16 "
                          "-> f32, B transposed, bias)";
  std::vector<ProfiledCommand> train = {
      kernel(0, "train_step_k0", 96),
      named("gemm", 1, qkv),
      named("attention", 2,
            "attention (bf16, 8 x 12 heads, 1024 queries, 1024 keys, head "
            "size 64, causal)"),
      named("layer_norm", 3, "layer norm 8192x768 + residual -> bf16"),
      kernel(4, "train_step_k1", 3072),
      named("gemm", 5, qkv),
      named("attention", 6,
            "attention backward (bf16, 8 x 12 heads, 1024 queries, 1024 "
            "keys, head size 64, causal)"),
      unnamed("collectives", 7, "all-reduce of 4096 f32, request 1"),
      unnamed("wait", 8, "wait for request 1"),
      unnamed("copy", 9, "local shard of 1024 f32"),
      kernel(10, "train_step_k1", 3072),
  };
  std::vector<double> trainMs = {0.5, 4.0, 3.0,  1.25, 2.5, 4.0,
                                 6.0, 0.0, 0.75, 0.25, 2.5};
  std::vector<ProfiledCommand> forward = {kernel(0, "forward_k0", 96),
                                          named("gemm", 1, qkv)};
  std::vector<double> forwardMs = {0.25, 1.75};
  return profileText(
      "Kiln CUDA profile (KILN_CUDA_PROFILE): gpt2-bf16.kiln, target 'cuda', "
      "NVIDIA H200, rank 0 of 1\n",
      {profileReport("train_step", train, trainMs, 26.5, 2),
       profileReport("forward", forward, forwardMs, 2.5, 1),
       profileReport("eval", {}, {}, 0.0, 0)});
}

TEST(ProfileReport, IsTheSampleTheBenchmarkReads) {
  std::string made = sampleText();
  std::string sample = readFile(KILN_TEST_PROFILE_SAMPLE);
  if (made != sample) {
    std::ofstream(KILN_TEST_PROFILE_MADE) << made;
    FAIL() << "the report differs from " << KILN_TEST_PROFILE_SAMPLE
           << "; it is in " << KILN_TEST_PROFILE_MADE
           << " (diff them; copy it over the sample after an intended "
              "change, and update bench/gpu_train.py's parse_profile)";
  }
}

TEST(ProfileReport, SortsLongestFirstAndSumsByWhatRuns) {
  std::string text = sampleText();
  for (const char *expected :
       {"entry point 'train_step': 2 run(s) timed, the first run left out\n",
        "  per run: 13.250 ms on the stream from the first command to the "
        "last, 12.375 ms (93.4%) inside the commands\n",
        // By kind: attention's 4.5 ms before the gemms' 4; the untimed
        // collectives count 0.
        "       4.500   36.4%         2  attention\n"
        "       4.000   32.3%         2  gemm\n"
        "       2.750   22.2%         3  kernel\n",
        "       0.000    0.0%         1  collectives\n",
        // Kernels are summed by name, with their kind in front; the others
        // by what they name.
        "       2.500   20.2%         2  kernel train_step_k1\n",
        "       4.000   32.3%         2  gemm (m 8192, n 2304",
        "by command (the 40 longest of 11)",
        "       3.000   24.2%            command 6 (attention backward",
        "entry point 'eval': 0 run(s) timed, the first run left out\n"})
    EXPECT_NE(text.find(expected), std::string::npos)
        << "no '" << expected << "' in:\n"
        << text;
  // Copies and waits have nothing to sum by.
  EXPECT_EQ(text.find("  copy\n", text.find("by kernel or shape")),
            std::string::npos)
      << text;
}

TEST(ProfileReport, CutsEachTableAtItsLength) {
  std::vector<ProfiledCommand> commands;
  std::vector<double> ms;
  for (int i = 0; i < 50; ++i) {
    commands.push_back(kernel(i, "k" + std::to_string(i), 1));
    ms.push_back(1.0 + i);
  }
  std::string text = profileReport("train_step", commands, ms, 2000.0, 1);
  EXPECT_NE(text.find("by kernel or shape (the 30 longest of 50)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("by command (the 40 longest of 50)"), std::string::npos)
      << text;
  // k49 is the longest, k20 the 30th in the shapes' table and k10 the 40th
  // command; k9 is in neither.
  EXPECT_NE(text.find("kernel k20\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("kernel k19\n"), std::string::npos) << text;
  EXPECT_NE(text.find("(kernel 'k10')"), std::string::npos) << text;
  EXPECT_EQ(text.find("(kernel 'k9')"), std::string::npos) << text;
  EXPECT_LT(text.find("kernel k49\n"), text.find("kernel k48\n")) << text;
}

} // namespace
