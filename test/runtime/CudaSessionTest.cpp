//===- CudaSessionTest.cpp - the C API running real CUDA code -------------===//
//
// Runs the CUDA test bundle (TestBundles.h, kernels of kernels.ptx) on a GPU
// through the C API: kernel launches, cuBLASLt gemms (plain and batched with
// transposes and beta), parameters updated in place, read and written, and
// the CUDA graph path (the first run direct, the second captured, later ones
// replayed) against the same runs with graphs off, and all-reduces through
// NCCL on a communicator of one rank, overlapping a kernel and joined back
// before the kernels that read them, one at a time and as one NCCL group
// (the all-reduce bundle with its two all-reduces made consecutive), and the
// runtime's attention and layer-norm kernels. Results are checked against
// host arithmetic (for attention and layer norm, the kernels' host versions
// in libkilnrt). Every test skips, saying why, where the CUDA backend cannot
// run (no driver, no device, built without CUDA).
//
// KILN_TEST_PTX and KILN_TEST_PTXAS, when set, name kernels.ptx and ptxas
// in place of the paths compiled in (for a copy of this test on a machine
// without the source tree: scripts/gpu-package.sh).
//
//===----------------------------------------------------------------------===//

#include "OpenWrittenBundle.h"
#include "TestBundles.h"
#include "kiln/abi/attention.h"
#include "kiln/abi/layer_norm.h"
#include "kiln/runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

using namespace kiln::runtime;
using namespace kiln::runtime::testing;
namespace bp = kiln::bundle;

namespace {

/// The environment variable's value if it is set and not empty, else
/// fallback.
std::string envOr(const char *name, const char *fallback) {
  const char *value = std::getenv(name);
  return value && *value ? value : fallback;
}

/// Writes the bundles once: PTX only (the driver compiles it), and an sm_90a
/// cubin assembled by ptxas plus the PTX (the cubin where the device is
/// 9.0, else the PTX).
class CudaSession : public ::testing::TestWithParam<const char *> {
protected:
  static void SetUpTestSuite() {
    const char *base = std::getenv("TMPDIR");
    dir = std::string(base && *base ? base : "/tmp") + "/kiln-cuda-XXXXXX";
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
    std::string ptxPath = envOr("KILN_TEST_PTX", KILN_TEST_PTX_SOURCE);
    std::string ptxas = envOr("KILN_TEST_PTXAS", KILN_TEST_PTXAS);
    std::string ptx, cubin;
    ASSERT_TRUE(readFile(ptxPath, ptx).ok()) << "cannot read " << ptxPath;
    writeBundle("ptx.kiln", {{bp::CodeImage::PTX, "compute_80", ptx}});
    writeAllReduceBundle("all-reduce-ptx.kiln",
                         {{bp::CodeImage::PTX, "compute_80", ptx}},
                         Variant::Plain);
    writeAllReduceBundle("all-reduce-grouped-ptx.kiln",
                         {{bp::CodeImage::PTX, "compute_80", ptx}},
                         Variant::Grouped);
    writeAllReduceBundle("all-reduce-sharded-ptx.kiln",
                         {{bp::CodeImage::PTX, "compute_80", ptx}},
                         Variant::Sharded);
    std::string cubinPath = dir + "/kernels.sm_90a.cubin";
    std::string command =
        "'" + ptxas + "' -arch=sm_90a -o '" + cubinPath + "' '" + ptxPath + "'";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    ASSERT_TRUE(readFile(cubinPath, cubin).ok());
    writeBundle("cubin.kiln", {{bp::CodeImage::CUBIN, "sm_90a", cubin},
                               {bp::CodeImage::PTX, "compute_80", ptx}});
    for (Variant variant : {Variant::Plain, Variant::Grouped, Variant::Sharded})
      writeAllReduceBundle(std::string("all-reduce") +
                               (variant == Variant::Grouped   ? "-grouped"
                                : variant == Variant::Sharded ? "-sharded"
                                                              : "") +
                               "-cubin.kiln",
                           {{bp::CodeImage::CUBIN, "sm_90a", cubin},
                            {bp::CodeImage::PTX, "compute_80", ptx}},
                           variant);
  }

  static void TearDownTestSuite() {
    std::string command = "rm -rf '" + dir + "'";
    EXPECT_EQ(std::system(command.c_str()), 0);
  }

  /// The CUDA bundle, and its twin "fixed-NAME" whose `bias` is fixed (the
  /// code relies on its value).
  static void writeBundle(const std::string &name,
                          std::vector<BundleWriter::Image> images) {
    for (bool fixed : {false, true}) {
      BundleWriter writer;
      buildCudaBundle(writer, images);
      if (fixed)
        writer.manifest().mutable_parameters(1)->set_fixed(true);
      Status status = writer.write(dir + "/" + (fixed ? "fixed-" : "") + name);
      ASSERT_TRUE(status.ok()) << status.message();
    }
  }

  /// The all-reduce bundle, or with `grouped` its variant whose two
  /// all-reduces are consecutive commands, which the session issues as one
  /// NCCL group: mean_step's accumulate launch, between them, moves before
  /// the first (it touches neither request's bytes while they are in
  /// flight, so the results stay the same).
  enum class Variant { Plain, Grouped, Sharded };

  /// A sharded optimizer's collectives over one rank, appended to
  /// mean_step: `total` (the accumulator, 4 values) reduce-scattered into
  /// arena [0, 16), its local shard copied to [16, 32) and all-gathered
  /// into `y`, so y ends as the accumulator.
  static void appendShardCollectives(bp::Program &program) {
    auto ref = [](bp::BufferRef::Kind kind, uint32_t index, uint64_t offset) {
      bp::BufferRef buffer;
      buffer.set_kind(kind);
      buffer.set_index(index);
      buffer.set_offset(offset);
      buffer.set_size(16);
      return buffer;
    };
    auto add = [&](bp::ShardCollective::Kind kind, bp::BufferRef input,
                   bp::BufferRef output, uint32_t request) {
      bp::ShardCollective &shard = *program.add_commands()->mutable_shard();
      shard.set_kind(kind);
      shard.set_count(4);
      shard.set_ranks(1);
      shard.set_request(request);
      *shard.mutable_input() = input;
      *shard.mutable_output() = output;
      if (request)
        program.add_commands()->mutable_collective_wait()->set_request(request);
    };
    add(bp::ShardCollective::REDUCE_SCATTER_MEAN,
        ref(bp::BufferRef::OUTPUT, 1, 0), ref(bp::BufferRef::ARENA, 0, 0), 3);
    add(bp::ShardCollective::LOCAL_SHARD, ref(bp::BufferRef::ARENA, 0, 0),
        ref(bp::BufferRef::ARENA, 0, 16), 0);
    add(bp::ShardCollective::ALL_GATHER, ref(bp::BufferRef::ARENA, 0, 16),
        ref(bp::BufferRef::OUTPUT, 0, 0), 4);
  }

  static void writeAllReduceBundle(const std::string &name,
                                   std::vector<BundleWriter::Image> images,
                                   Variant variant) {
    BundleWriter writer;
    buildCudaAllReduceBundle(writer, std::move(images));
    if (variant == Variant::Sharded)
      appendShardCollectives(
          *writer.manifest().mutable_entry_points(0)->mutable_programs(0));
    if (variant == Variant::Grouped) {
      auto &commands = *writer.manifest()
                            .mutable_entry_points(0)
                            ->mutable_programs(0)
                            ->mutable_commands();
      ASSERT_TRUE(
          commands.size() == 7 && commands.Get(1).has_all_reduce_mean() &&
          commands.Get(2).has_launch() && commands.Get(3).has_all_reduce_mean())
          << "the all-reduce bundle's mean_step changed";
      commands.SwapElements(1, 2);
    }
    Status status = writer.write(dir + "/" + name);
    ASSERT_TRUE(status.ok()) << status.message();
  }

  void SetUp() override {
    std::string path = dir + "/" + GetParam();
    ASSERT_EQ(kiln_bundle_open(path.c_str(), &bundle), KILN_OK)
        << kiln_status_message();
    kiln_status_t status = kiln_session_create(bundle, "cuda", &session);
    if (status == KILN_STATUS_UNSUPPORTED)
      GTEST_SKIP() << "no CUDA here: " << kiln_status_message();
    ASSERT_EQ(status, KILN_OK) << kiln_status_message();
  }

  void TearDown() override {
    kiln_session_release(session);
    kiln_bundle_release(bundle);
    unsetenv("KILN_CUDA_GRAPHS");
    unsetenv("KILN_CUDA_PROFILE");
    unsetenv("KILN_CUDA_SYNC");
  }

  static std::string dir;
  kiln_bundle_t *bundle = nullptr;
  kiln_session_t *session = nullptr;
};

std::string CudaSession::dir;

kiln_tensor_t f32Tensor(const char *name, std::vector<float> &data,
                        const std::vector<int64_t> &shape) {
  return {
      name,         KILN_ELEMENT_TYPE_F32, static_cast<int32_t>(shape.size()),
      shape.data(), data.data(),           data.size() * sizeof(float)};
}

/// Tolerance for f32 products of a few terms, summed in another order.
void expectNear(const std::vector<float> &actual,
                const std::vector<float> &expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], 1e-5f * (1 + std::fabs(expected[i])))
        << "element " << i;
}

/// y = x w + bias on the host, x 2 x 4, w 4 x 3.
std::vector<float> affineReference(const std::vector<float> &x) {
  std::vector<float> y(6);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c) {
      double sum = kCudaBias[c];
      for (int k = 0; k < 4; ++k)
        sum += double(x[r * 4 + k]) * kCudaW[k * 3 + c];
      y[r * 3 + c] = static_cast<float>(sum);
    }
  return y;
}

std::vector<float> affineInput(int run) {
  std::vector<float> x(8);
  for (int i = 0; i < 8; ++i)
    x[i] = 0.25f * static_cast<float>(i * (run + 1)) - static_cast<float>(run);
  return x;
}

void runAffine(kiln_session_t *session, int run) {
  std::vector<float> x = affineInput(run), y(6, -99);
  static const std::vector<int64_t> xShape = {2, 4}, yShape = {2, 3};
  kiln_tensor_t input = f32Tensor("x", x, xShape);
  kiln_tensor_t output = f32Tensor("y", y, yShape);
  ASSERT_EQ(kiln_session_run(session, "affine", &input, 1, &output, 1), KILN_OK)
      << kiln_status_message();
  SCOPED_TRACE("run " + std::to_string(run));
  expectNear(y, affineReference(x));
}

TEST_P(CudaSession, RunsAGemmAndAKernelAndReplaysTheGraph) {
  // Run 0 executes the commands, run 1 captures and launches the graph, runs
  // 2 and 3 replay it; each with other inputs.
  for (int run = 0; run < 4; ++run)
    runAffine(session, run);
  uint64_t arena = 0;
  ASSERT_EQ(kiln_session_get_arena_bytes(session, &arena), KILN_OK);
  EXPECT_EQ(arena, 512u);
}

/// A loader thread stages run k + 1's input (pinned, copied to the device on
/// the copy stream) while run k goes on, through the direct, captured and
/// replayed runs; staged inputs are copied at once and serve one run each.
TEST_P(CudaSession, StagesTheNextInputWhileARunGoesOn) {
  constexpr int kRuns = 12;
  static const std::vector<int64_t> xShape = {2, 4}, yShape = {2, 3};
  std::vector<float> x = affineInput(0), y(6, -99);
  kiln_tensor_t input = f32Tensor("x", x, xShape);
  kiln_tensor_t output = f32Tensor("y", y, yShape);
  ASSERT_EQ(kiln_session_stage_inputs(session, "affine", &input, 1), KILN_OK)
      << kiln_status_message();
  x.assign(8, 1e6f); // the stage copied the tensor
  for (int run = 0; run < kRuns; ++run) {
    std::thread loader([&]() {
      if (run + 1 == kRuns)
        return;
      std::vector<float> next = affineInput(run + 1);
      kiln_tensor_t staged = f32Tensor("x", next, xShape);
      EXPECT_EQ(kiln_session_stage_inputs(session, "affine", &staged, 1),
                KILN_OK)
          << kiln_status_message();
    });
    ASSERT_EQ(kiln_session_run_staged(session, "affine", &output, 1), KILN_OK)
        << kiln_status_message();
    loader.join();
    SCOPED_TRACE("run " + std::to_string(run));
    expectNear(y, affineReference(affineInput(run)));
  }
  EXPECT_EQ(kiln_session_run_staged(session, "affine", &output, 1),
            KILN_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_status_message()).find("no inputs are staged"),
            std::string::npos)
      << kiln_status_message();
  // Plain runs still copy their own inputs.
  runAffine(session, 3);
}

/// Three affine runs in a session created with `variable` set to `value`
/// (the fixture's TearDown unsets it).
void runAffineWith(kiln_bundle_t *bundle, const char *variable,
                   const char *value) {
  kiln_session_t *other = nullptr;
  setenv(variable, value, 1);
  ASSERT_EQ(kiln_session_create(bundle, "cuda", &other), KILN_OK)
      << kiln_status_message();
  for (int run = 0; run < 3; ++run)
    runAffine(other, run);
  kiln_session_release(other);
}

TEST_P(CudaSession, RunsWithGraphsOff) {
  runAffineWith(bundle, "KILN_CUDA_GRAPHS", "0");
}

TEST_P(CudaSession, RunsWithEachCommandWaitedFor) {
  runAffineWith(bundle, "KILN_CUDA_SYNC", "1");
}

TEST_P(CudaSession, RefusesAMalformedSyncSetting) {
  kiln_session_t *other = nullptr;
  setenv("KILN_CUDA_SYNC", "on", 1);
  EXPECT_EQ(kiln_session_create(bundle, "cuda", &other),
            KILN_STATUS_INVALID_ARGUMENT);
  unsetenv("KILN_CUDA_SYNC");
  EXPECT_NE(std::string(kiln_status_message())
                .find("KILN_CUDA_SYNC='on' is not 0 or 1"),
            std::string::npos)
      << kiln_status_message();
  EXPECT_EQ(other, nullptr);
}

/// Runs the fault entry point (its second command traps) in a session
/// created with KILN_CUDA_SYNC set to `sync`, prints the error and exits
/// with 3; 4 if the run did not fail. A trap leaves the process's context
/// unusable, so this runs in a death test's child process.
[[noreturn]] void runFaultAndExit(kiln_bundle_t *bundle, const char *sync) {
  setenv("KILN_CUDA_SYNC", sync, 1);
  kiln_session_t *faulting = nullptr;
  if (kiln_session_create(bundle, "cuda", &faulting) != KILN_OK) {
    std::fprintf(stderr, "session: %s\n", kiln_status_message());
    std::exit(5);
  }
  std::vector<float> x(4, 1), y(4);
  static const std::vector<int64_t> shape = {4};
  kiln_tensor_t input = f32Tensor("x", x, shape);
  kiln_tensor_t output = f32Tensor("y", y, shape);
  kiln_status_t status =
      kiln_session_run(faulting, "fault", &input, 1, &output, 1);
  std::fprintf(stderr, "%s\n", kiln_status_message());
  std::exit(status == KILN_OK ? 4 : 3);
}

/// A fault on the device surfaces when the run waits for the stream: the
/// error says so and how to find the command, and with KILN_CUDA_SYNC=1 it
/// names the command (its kernel) that faulted.
TEST_P(CudaSession, AFaultOnTheDeviceNamesTheCommandWhenSynced) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(runFaultAndExit(bundle, "0"), ::testing::ExitedWithCode(3),
              "entry point 'fault'.*finishing the run.*KILN_CUDA_SYNC=1 "
              "waits after each command");
  EXPECT_EXIT(runFaultAndExit(bundle, "1"), ::testing::ExitedWithCode(3),
              "entry point 'fault'.*waiting for command 1 \\(kernel "
              "'fault'\\) \\(KILN_CUDA_SYNC=1\\)");
}

TEST_P(CudaSession, RefusesAMalformedBiasGradSetting) {
  kiln_session_t *other = nullptr;
  setenv("KILN_CUDA_BIAS_GRAD", "kernel", 1);
  EXPECT_EQ(kiln_session_create(bundle, "cuda", &other),
            KILN_STATUS_INVALID_ARGUMENT);
  unsetenv("KILN_CUDA_BIAS_GRAD");
  EXPECT_NE(std::string(kiln_status_message())
                .find("KILN_CUDA_BIAS_GRAD='kernel' is not epilogue or "
                      "product"),
            std::string::npos)
      << kiln_status_message();
  EXPECT_EQ(other, nullptr);
}

TEST_P(CudaSession, RefusesAMalformedGraphsSetting) {
  kiln_session_t *other = nullptr;
  setenv("KILN_CUDA_GRAPHS", "yes", 1);
  EXPECT_EQ(kiln_session_create(bundle, "cuda", &other),
            KILN_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_status_message())
                .find("KILN_CUDA_GRAPHS='yes' is not 0 or 1"),
            std::string::npos)
      << kiln_status_message();
  EXPECT_EQ(other, nullptr);
}

std::string readText(const std::string &path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST_P(CudaSession, WritesAProfileOfEachCommand) {
  std::string pattern = dir + "/profile-%p.txt";
  std::string path = dir + "/profile-" + std::to_string(getpid()) + ".txt";
  std::remove(path.c_str());
  setenv("KILN_CUDA_PROFILE", pattern.c_str(), 1);
  kiln_session_t *profiled = nullptr;
  ASSERT_EQ(kiln_session_create(bundle, "cuda", &profiled), KILN_OK)
      << kiln_status_message();
  // The first run is left out; the others run directly and are timed, and
  // still compute the right values.
  runAffine(profiled, 0);
  EXPECT_FALSE(std::ifstream(path).good()) << "written before a timed run";
  for (int run = 1; run < 4; ++run)
    runAffine(profiled, run);
  kiln_session_release(profiled);
  std::string text = readText(path);
  for (const char *expected :
       {"Kiln CUDA profile (KILN_CUDA_PROFILE)", "target 'cuda'",
        "entry point 'affine': 3 run(s) timed, the first run left out",
        "by kind:", "gemm (m 2, n 3, k 4", " kernel\n",
        "by command (the 40 longest of 2)", "(kernel '", " grid "})
    EXPECT_NE(text.find(expected), std::string::npos)
        << "no '" << expected << "' in:\n"
        << text;
}

TEST_P(CudaSession, ReportsAnUnwritableProfile) {
  setenv("KILN_CUDA_PROFILE", (dir + "/no-such-dir/profile.txt").c_str(), 1);
  kiln_session_t *profiled = nullptr;
  ASSERT_EQ(kiln_session_create(bundle, "cuda", &profiled), KILN_OK)
      << kiln_status_message();
  std::vector<float> x = affineInput(0), y(6);
  static const std::vector<int64_t> xShape = {2, 4}, yShape = {2, 3};
  kiln_tensor_t input = f32Tensor("x", x, xShape);
  kiln_tensor_t output = f32Tensor("y", y, yShape);
  EXPECT_EQ(kiln_session_run(profiled, "affine", &input, 1, &output, 1),
            KILN_OK);
  EXPECT_EQ(kiln_session_run(profiled, "affine", &input, 1, &output, 1),
            KILN_STATUS_IO_ERROR);
  EXPECT_NE(std::string(kiln_status_message())
                .find("KILN_CUDA_PROFILE: cannot write"),
            std::string::npos)
      << kiln_status_message();
  kiln_session_release(profiled);
}

/// acc += x through captured and replayed runs: each replay must see the
/// parameter as the previous run and set_parameter left it.
TEST_P(CudaSession, UpdatesParametersInPlaceAcrossReplays) {
  static const std::vector<int64_t> shape = {4};
  std::vector<float> acc(kWeightAcc, kWeightAcc + 4);
  for (int run = 0; run < 5; ++run) {
    if (run == 3) {
      std::vector<float> reset = {1, 2, 3, 4};
      ASSERT_EQ(kiln_session_set_parameter(session, "acc", reset.data(), 16),
                KILN_OK)
          << kiln_status_message();
      acc = reset;
    }
    std::vector<float> x = {1.5f * run, -1, 0.5f, float(run)}, y(4);
    kiln_tensor_t input = f32Tensor("x", x, shape);
    kiln_tensor_t output = f32Tensor("y", y, shape);
    ASSERT_EQ(kiln_session_run(session, "accumulate", &input, 1, &output, 1),
              KILN_OK)
        << kiln_status_message();
    for (int i = 0; i < 4; ++i)
      acc[i] += x[i];
    SCOPED_TRACE("run " + std::to_string(run));
    expectNear(y, acc);
    std::vector<float> stored(4);
    ASSERT_EQ(kiln_session_get_parameter(session, "acc", stored.data(), 16),
              KILN_OK)
        << kiln_status_message();
    expectNear(stored, acc);
  }
}

/// A fixed parameter takes its own value again and refuses any other,
/// keeping its value on the device.
TEST_P(CudaSession, FixedParametersKeepTheirValue) {
  kiln_bundle_t *fixed = nullptr;
  std::string path = dir + "/fixed-" + GetParam();
  ASSERT_EQ(kiln_bundle_open(path.c_str(), &fixed), KILN_OK)
      << kiln_status_message();
  kiln_session_t *s = nullptr;
  ASSERT_EQ(kiln_session_create(fixed, "cuda", &s), KILN_OK)
      << kiln_status_message();
  kiln_bundle_release(fixed);
  std::vector<float> bias(kCudaBias, kCudaBias + 3);
  EXPECT_EQ(kiln_session_set_parameter(s, "bias", bias.data(), 12), KILN_OK)
      << kiln_status_message();
  bias[1] += 1;
  EXPECT_EQ(kiln_session_set_parameter(s, "bias", bias.data(), 12),
            KILN_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_status_message())
                .find("parameter 'bias' is fixed: kilnc compiled its value "
                      "into the bundle's code"),
            std::string::npos)
      << kiln_status_message();
  runAffine(s, 0);
  kiln_session_release(s);
}

/// g[i] = 0.5 a[i]^T b[i]^T + g[i] over a batch of two, then c = g.
TEST_P(CudaSession, RunsABatchedTransposedGemmWithBeta) {
  static const std::vector<int64_t> aShape = {2, 5, 3}, bShape = {2, 4, 5},
                                    cShape = {2, 3, 4};
  std::vector<float> g(24, kCudaG);
  for (int run = 0; run < 3; ++run) {
    std::vector<float> a(30), b(40), c(24);
    for (int i = 0; i < 30; ++i)
      a[i] = static_cast<float>((i * 7 + run) % 11) - 5;
    for (int i = 0; i < 40; ++i)
      b[i] = 0.5f * static_cast<float>((i * 3 + 2 * run) % 9) - 2;
    kiln_tensor_t inputs[] = {f32Tensor("a", a, aShape),
                              f32Tensor("b", b, bShape)};
    kiln_tensor_t output = f32Tensor("c", c, cShape);
    ASSERT_EQ(kiln_session_run(session, "batched", inputs, 2, &output, 1),
              KILN_OK)
        << kiln_status_message();
    // a[i] is stored k x m (5 x 3), b[i] n x k (4 x 5).
    for (int i = 0; i < 2; ++i)
      for (int row = 0; row < 3; ++row)
        for (int col = 0; col < 4; ++col) {
          double sum = 0;
          for (int k = 0; k < 5; ++k)
            sum += double(a[i * 15 + k * 3 + row]) * b[i * 20 + col * 5 + k];
          float &value = g[i * 12 + row * 4 + col];
          value = static_cast<float>(0.5 * sum + value);
        }
    SCOPED_TRACE("run " + std::to_string(run));
    expectNear(c, g);
  }
}

/// c[:, :3] = a[:, :4] w, a's rows 6 elements apart (lda 6) and c's 4 (ldc
/// 4), as kiln-pad-matrix-rows lays matrices out: the padding of a is never
/// read (a huge value there would show), and the last column of c is never
/// written.
TEST_P(CudaSession, RunsAGemmOnPaddedRows) {
  static const std::vector<int64_t> aShape = {2, 6}, cShape = {2, 4};
  std::vector<float> a(12), c(8, -7);
  for (int i = 0; i < 12; ++i)
    a[i] = i % 6 < 4 ? static_cast<float>((i * 5) % 7) - 3 : 1e30f;
  kiln_tensor_t input = f32Tensor("a", a, aShape);
  kiln_tensor_t output = f32Tensor("c", c, cShape);
  ASSERT_EQ(kiln_session_run(session, "padded", &input, 1, &output, 1), KILN_OK)
      << kiln_status_message();
  std::vector<float> product, expected;
  for (int row = 0; row < 2; ++row)
    for (int col = 0; col < 3; ++col) {
      double sum = 0;
      for (int k = 0; k < 4; ++k)
        sum += double(a[row * 6 + k]) * kCudaW[k * 3 + col];
      expected.push_back(static_cast<float>(sum));
      product.push_back(c[row * 4 + col]);
    }
  expectNear(product, expected);
}

TEST_P(CudaSession, ErrorsNameWhatIsWrong) {
  std::vector<float> x(4), y(4);
  static const std::vector<int64_t> shape = {4}, wrong = {5};
  kiln_tensor_t input = f32Tensor("x", x, shape);
  kiln_tensor_t output = f32Tensor("y", y, shape);
  kiln_tensor_t misshaped = f32Tensor("x", x, wrong);
  misshaped.byte_size = 20;
  EXPECT_EQ(kiln_session_run(session, "add_one", &misshaped, 1, &output, 1),
            KILN_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_status_message())
                .find("entry point 'add_one': input 'x' has type f32[5], "
                      "expected f32[4]"),
            std::string::npos)
      << kiln_status_message();
  EXPECT_EQ(kiln_session_run(session, "backward", &input, 1, &output, 1),
            KILN_STATUS_NOT_FOUND);
  EXPECT_EQ(kiln_session_get_parameter(session, "w", x.data(), 16),
            KILN_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_status_message())
                .find("parameter 'w' (f32[4,3]) has 48 bytes, not 16"),
            std::string::npos)
      << kiln_status_message();
  EXPECT_EQ(kiln_session_get_parameter(session, "nope", x.data(), 16),
            KILN_STATUS_NOT_FOUND);
  // The session still runs after refusing those.
  x = {1, 2, 3, 4};
  ASSERT_EQ(kiln_session_run(session, "add_one", &input, 1, &output, 1),
            KILN_OK)
      << kiln_status_message();
  expectNear(y, {2, 3, 4, 5});
}

/// Without a launcher (and without kiln_distributed_init) the process is a
/// single rank: the session joins an NCCL communicator of one and runs the
/// all-reduces through it, direct, captured and replayed. A mean over one
/// rank leaves the values as they are, the kernel after each wait reads
/// them, and in the ungrouped bundle the accumulate launched while request 1
/// is in flight is not disturbed by it.
/// With `sharded`, mean_step ends with a sharded optimizer's collectives
/// over one rank that leave the accumulator in y.
void runMeanSteps(const std::string &path, bool sharded = false) {
  kiln_bundle_t *dataParallel = nullptr;
  ASSERT_EQ(kiln_bundle_open(path.c_str(), &dataParallel), KILN_OK)
      << kiln_status_message();
  kiln_session_t *reducing = nullptr;
  ASSERT_EQ(kiln_session_create(dataParallel, "cuda", &reducing), KILN_OK)
      << kiln_status_message();
  kiln_bundle_release(dataParallel);
  static const std::vector<int64_t> shape = {4};
  std::vector<float> acc(kWeightAcc, kWeightAcc + 4);
  for (int run = 0; run < 4; ++run) {
    std::vector<float> x = {0.5f * run, -1, 2.25f, float(run * run)};
    std::vector<float> y(4, -99), total(4, -99), expected(4);
    kiln_tensor_t input = f32Tensor("x", x, shape);
    kiln_tensor_t outputs[] = {f32Tensor("y", y, shape),
                               f32Tensor("total", total, shape)};
    ASSERT_EQ(kiln_session_run(reducing, "mean_step", &input, 1, outputs, 2),
              KILN_OK)
        << kiln_status_message();
    for (int i = 0; i < 4; ++i) {
      acc[i] += x[i];
      expected[i] = x[i] + 2;
    }
    SCOPED_TRACE("run " + std::to_string(run));
    expectNear(y, sharded ? acc : expected);
    expectNear(total, acc);
    std::vector<float> stored(4);
    ASSERT_EQ(kiln_session_get_parameter(reducing, "acc", stored.data(), 16),
              KILN_OK)
        << kiln_status_message();
    expectNear(stored, acc);
  }
  kiln_session_release(reducing);
}

TEST_P(CudaSession, AllReducesOnOneRankKeepTheValues) {
  runMeanSteps(dir + "/all-reduce-" + GetParam());
}

/// The same with both all-reduces in one NCCL group, each request's wait
/// joining the group's end.
TEST_P(CudaSession, GroupedAllReducesOnOneRankKeepTheValues) {
  runMeanSteps(dir + "/all-reduce-grouped-" + GetParam());
}

/// A reduce-scatter, a local shard and an all-gather over one rank (NCCL,
/// then a copy in stream order, then NCCL) move the values unchanged.
TEST_P(CudaSession, ShardCollectivesOnOneRankMoveTheValues) {
  runMeanSteps(dir + "/all-reduce-sharded-" + GetParam(), /*sharded=*/true);
}

/// Writes the bundle `build` makes with kernels.ptx as `name`, opens it and
/// creates a CUDA session of it; with no CUDA here, skips the test and
/// leaves both null.
void openPtxSession(void (*build)(BundleWriter &,
                                  std::vector<BundleWriter::Image>),
                    const char *name, kiln_bundle_t **bundle,
                    kiln_session_t **session) {
  *bundle = nullptr;
  *session = nullptr;
  std::string ptxPath = envOr("KILN_TEST_PTX", KILN_TEST_PTX_SOURCE), ptx;
  ASSERT_TRUE(readFile(ptxPath, ptx).ok()) << "cannot read " << ptxPath;
  BundleWriter writer;
  build(writer, {{bp::CodeImage::PTX, "compute_80", ptx}});
  ASSERT_NO_FATAL_FAILURE(openWrittenBundle(writer, name, bundle));
  kiln_status_t created = kiln_session_create(*bundle, "cuda", session);
  if (created == KILN_STATUS_UNSUPPORTED) {
    kiln_bundle_release(*bundle);
    *bundle = nullptr;
    GTEST_SKIP() << "no CUDA here: " << kiln_status_message();
  }
  ASSERT_EQ(created, KILN_OK) << kiln_status_message();
}

/// The attention bundle's entry points on the GPU against the runtime's
/// host version of its kernels (kiln/abi/attention.h), with bf16 rounding's
/// tolerance: they add the same terms in other orders.
TEST(CudaAttention, MatchesTheHostVersion) {
  kiln_bundle_t *bundle = nullptr;
  kiln_session_t *session = nullptr;
  ASSERT_NO_FATAL_FAILURE(openPtxSession(
      buildCudaAttentionBundle, "kiln-cuda-attention", &bundle, &session));
  if (!session)
    return;

  const int64_t b = kAttentionBatch, h = kAttentionHeads, s = kAttentionSeq,
                d = kAttentionHeadSize;
  const size_t n = b * h * s * d, rows = b * h * s;
  std::vector<int64_t> shape{b, h, s, d}, statsShape{b, h, s, 2},
      deltaShape{b, h, s}, maskShape{b, 1, 1, s};
  // bf16 inputs from f32 by truncation (exact, and enough for a test).
  auto bf16 = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return static_cast<uint16_t>(u >> 16);
  };
  std::vector<uint16_t> q(n), k(n), v(n);
  std::vector<float> mask(b * s, 0.0f), grad(n);
  for (size_t i = 0; i < n; ++i) {
    q[i] = bf16(std::sin(0.37f * i));
    k[i] = bf16(std::cos(0.23f * i));
    v[i] = bf16(std::sin(0.11f * i + 1));
    grad[i] = std::cos(0.05f * i);
  }
  for (int64_t j = 50; j < s; ++j)
    mask[s + j] = -INFINITY; // batch 1 sees its first 50 keys
  // Batch 0 drops its last 10 with the lowest float (as Hugging Face's
  // masks do), which is below the lowest float in the kernels' log2 units.
  for (int64_t j = 70; j < s; ++j)
    mask[j] = std::numeric_limits<float>::lowest();
  auto narrow = [](const char *name, std::vector<uint16_t> &data,
                   const std::vector<int64_t> &dims) {
    return kiln_tensor_t{name,
                         KILN_ELEMENT_TYPE_BF16,
                         static_cast<int32_t>(dims.size()),
                         dims.data(),
                         data.data(),
                         data.size() * 2};
  };
  auto expectClose = [](const std::vector<float> &got,
                        const std::vector<float> &want, const char *what) {
    double diff = 0, scale = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_FALSE(std::isnan(got[i])) << what << " element " << i;
      diff = std::max(diff, double(std::fabs(got[i] - want[i])));
      scale = std::max(scale, double(std::fabs(want[i])));
    }
    EXPECT_LT(diff, 2e-2 * scale) << what;
  };

  std::vector<float> out(n, NAN), stats(2 * rows, NAN), hostOut(n),
      hostStats(2 * rows);
  kiln_tensor_t inputs[] = {narrow("q", q, shape), narrow("k", k, shape),
                            narrow("v", v, shape),
                            f32Tensor("mask", mask, maskShape)};
  kiln_tensor_t outputs[] = {f32Tensor("out", out, shape),
                             f32Tensor("stats", stats, statsShape)};
  ASSERT_EQ(kiln_session_run(session, "attention", inputs, 4, outputs, 2),
            KILN_OK)
      << kiln_status_message();
  kiln_flash_attention_forward_host(q.data(), k.data(), v.data(), mask.data(),
                                    hostOut.data(), hostStats.data(), 0, b, h,
                                    s, s, d, b, 1, 1, 0, 0.125);
  expectClose(out, hostOut, "out");
  expectClose(stats, hostStats, "stats");

  std::vector<float> dq(n, NAN), dk(n, NAN), dv(n, NAN), delta(rows, NAN);
  std::vector<float> hq(n), hk(n), hv(n), hdelta(rows);
  kiln_tensor_t gradInputs[] = {narrow("q", q, shape),
                                narrow("k", k, shape),
                                narrow("v", v, shape),
                                f32Tensor("out", hostOut, shape),
                                f32Tensor("grad", grad, shape),
                                f32Tensor("stats", hostStats, statsShape),
                                f32Tensor("mask", mask, maskShape)};
  kiln_tensor_t gradOutputs[] = {
      f32Tensor("dq", dq, shape), f32Tensor("dk", dk, shape),
      f32Tensor("dv", dv, shape), f32Tensor("delta", delta, deltaShape)};
  ASSERT_EQ(kiln_session_run(session, "attention_grad", gradInputs, 7,
                             gradOutputs, 4),
            KILN_OK)
      << kiln_status_message();
  kiln_flash_attention_backward_host(
      q.data(), k.data(), v.data(), hostOut.data(), grad.data(),
      hostStats.data(), mask.data(), hq.data(), hk.data(), hv.data(),
      hdelta.data(), 0, b, h, s, s, d, b, 1, 1, 0, 0.125, 0, 0);
  expectClose(dq, hq, "dq");
  expectClose(dk, hk, "dk");
  expectClose(dv, hv, "dv");
  expectClose(delta, hdelta, "delta");

  kiln_tensor_t causalOutputs[] = {f32Tensor("out", out, shape),
                                   f32Tensor("stats", stats, statsShape)};
  ASSERT_EQ(kiln_session_run(session, "causal", inputs, 3, causalOutputs, 2),
            KILN_OK)
      << kiln_status_message();
  kiln_flash_attention_forward_host(q.data(), k.data(), v.data(), nullptr,
                                    hostOut.data(), hostStats.data(), 0, b, h,
                                    s, s, d, 1, 1, 1, 1, 0.125);
  expectClose(out, hostOut, "causal out");
  expectClose(stats, hostStats, "causal stats");

  kiln_session_release(session);
  kiln_bundle_release(bundle);
}

/// A 16-bit float's bits as a float (bf16, or else f16).
float wideOf(uint16_t bits, bool bf16) {
  if (bf16) {
    uint32_t u = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  _Float16 h;
  std::memcpy(&h, &bits, 2);
  return static_cast<float>(h);
}

/// `f` rounded to nearest even to bf16, or else f16, as bits (f finite).
uint16_t narrowOf(float f, bool bf16) {
  if (bf16) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
  }
  _Float16 h = static_cast<_Float16>(f);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}

/// The spacing of the 16-bit type's values at `v`: 8 significant bits for
/// bf16, 11 for f16 (whose subnormals are 2^-24 apart).
double unitInTheLastPlace(double v, bool bf16) {
  int exponent = 0;
  std::frexp(std::fabs(v), &exponent);
  return bf16 ? std::ldexp(1.0, exponent - 8)
              : std::max(std::ldexp(1.0, exponent - 11), std::ldexp(1.0, -24));
}

/// The layer-norm bundle's entry points on the GPU against the runtime's
/// host version of its kernels (kiln/abi/layer_norm.h): f32 results within
/// 1e-5 of the largest magnitude (the warps sum in a tree, the host in
/// order), 16-bit outputs within one unit in their last place, a residual's
/// sum (one f32 add) to the bit. The backward runs twice, directly and then
/// captured as a graph, with the same bits: its sums take no atomics; the
/// forward with a residual and the backward with an accumulated input
/// gradient run once each, as do the backwards that also round their input
/// gradient, to bf16 (accumulating) and f16 (not), whose rounded values are
/// the GPU's f32 input gradient rounded to nearest even, to the bit. The
/// f32 forward with a bf16 copy writes both, the copy within one unit in
/// its last place of the host's.
TEST(CudaLayerNorm, MatchesTheHostVersion) {
  kiln_bundle_t *bundle = nullptr;
  kiln_session_t *session = nullptr;
  ASSERT_NO_FATAL_FAILURE(openPtxSession(
      buildCudaLayerNormBundle, "kiln-cuda-layer-norm", &bundle, &session));
  if (!session)
    return;

  const int64_t rows = kLayerNormRows, cols = kLayerNormCols,
                blocks = (rows + 31) / 32;
  const size_t n = rows * cols;
  std::vector<int64_t> matrixShape{rows, cols}, vectorShape{cols},
      partialsShape{blocks, 2, cols};
  // The inputs are tensors the session reads, so not const.
  LayerNormInputs inputs(rows, cols);
  std::vector<float> &x = inputs.x, &residual = inputs.residual,
                     &grad = inputs.grad, &accumulate = inputs.accumulate,
                     &scale = inputs.scale, &bias = inputs.bias;
  auto expectClose = [](const std::vector<float> &got,
                        const std::vector<float> &want, const char *what) {
    double largest = 0;
    for (float w : want)
      largest = std::max(largest, double(std::fabs(w)));
    int failures = 0;
    for (size_t i = 0; i < want.size() && failures < 5; ++i)
      if (!(std::fabs(double(got[i]) - want[i]) <= 1e-5 * largest)) {
        ADD_FAILURE() << what << " element " << i << ": " << got[i]
                      << ", the host's " << want[i];
        ++failures;
      }
  };
  // Near 0 the spacing of 16-bit values is finer than the f32 rounding:
  // there the bound is 1e-5 of the largest, as for f32 results.
  auto expectHalfClose = [&](const std::vector<uint16_t> &got,
                             const std::vector<uint16_t> &want, bool bf16,
                             const char *what) {
    double largest = 0;
    for (uint16_t bits : want)
      largest = std::max(largest, std::fabs(double(wideOf(bits, bf16))));
    int failures = 0;
    for (size_t i = 0; i < n && failures < 5; ++i) {
      double g = wideOf(got[i], bf16), host = wideOf(want[i], bf16);
      double bound = std::max(unitInTheLastPlace(host, bf16), 1e-5 * largest);
      if (!(std::fabs(g - host) <= bound)) {
        ADD_FAILURE() << what << " element " << i << ": " << g
                      << ", the host's " << host;
        ++failures;
      }
    }
  };

  {
    SCOPED_TRACE("f32 output without a bias");
    std::vector<float> y(n, NAN), want(n);
    kiln_tensor_t inputs[] = {f32Tensor("x", x, matrixShape),
                              f32Tensor("scale", scale, vectorShape)};
    kiln_tensor_t outputs[] = {f32Tensor("y", y, matrixShape)};
    ASSERT_EQ(
        kiln_session_run(session, "layer_norm_f32", inputs, 2, outputs, 1),
        KILN_OK)
        << kiln_status_message();
    kiln_layer_norm_forward_host(x.data(), nullptr, scale.data(), nullptr,
                                 want.data(), nullptr, 0, rows, cols,
                                 kLayerNormEpsilon);
    expectClose(y, want, "y");
  }

  for (bool bf16 : {true, false}) {
    SCOPED_TRACE(bf16 ? "bf16 output with a bias" : "f16 output with a bias");
    std::vector<uint16_t> y(n, 0xffff), want(n);
    kiln_tensor_t inputs[] = {f32Tensor("x", x, matrixShape),
                              f32Tensor("scale", scale, vectorShape),
                              f32Tensor("bias", bias, vectorShape)};
    kiln_tensor_t outputs[] = {
        {"y", bf16 ? KILN_ELEMENT_TYPE_BF16 : KILN_ELEMENT_TYPE_F16, 2,
         matrixShape.data(), y.data(), n * 2}};
    ASSERT_EQ(kiln_session_run(session, bf16 ? "layer_norm" : "layer_norm_f16",
                               inputs, 3, outputs, 1),
              KILN_OK)
        << kiln_status_message();
    kiln_layer_norm_forward_host(x.data(), nullptr, scale.data(), bias.data(),
                                 want.data(), nullptr, bf16 ? 1 : 2, rows, cols,
                                 kLayerNormEpsilon);
    expectHalfClose(y, want, bf16, "y");
  }

  {
    SCOPED_TRACE("bf16 output of input + residual");
    std::vector<uint16_t> y(n, 0xffff), want(n);
    std::vector<float> sum(n, NAN), wantSum(n);
    kiln_tensor_t inputs[] = {f32Tensor("x", x, matrixShape),
                              f32Tensor("scale", scale, vectorShape),
                              f32Tensor("bias", bias, vectorShape),
                              f32Tensor("residual", residual, matrixShape)};
    kiln_tensor_t outputs[] = {
        {"y", KILN_ELEMENT_TYPE_BF16, 2, matrixShape.data(), y.data(), n * 2},
        f32Tensor("sum", sum, matrixShape)};
    ASSERT_EQ(
        kiln_session_run(session, "layer_norm_residual", inputs, 4, outputs, 2),
        KILN_OK)
        << kiln_status_message();
    kiln_layer_norm_forward_host(x.data(), residual.data(), scale.data(),
                                 bias.data(), want.data(), wantSum.data(), 1,
                                 rows, cols, kLayerNormEpsilon);
    EXPECT_EQ(std::memcmp(sum.data(), wantSum.data(), n * 4), 0);
    expectHalfClose(y, want, true, "y");
  }

  {
    SCOPED_TRACE("f32 output of input + residual and its bf16 copy");
    std::vector<float> y(n, NAN), want(n), sum(n, NAN), wantSum(n);
    std::vector<uint16_t> copy(n, 0xffff), wantCopy(n);
    kiln_tensor_t inputs[] = {f32Tensor("x", x, matrixShape),
                              f32Tensor("scale", scale, vectorShape),
                              f32Tensor("bias", bias, vectorShape),
                              f32Tensor("residual", residual, matrixShape)};
    kiln_tensor_t outputs[] = {f32Tensor("y", y, matrixShape),
                               f32Tensor("sum", sum, matrixShape),
                               {"y_rounded", KILN_ELEMENT_TYPE_BF16, 2,
                                matrixShape.data(), copy.data(), n * 2}};
    ASSERT_EQ(
        kiln_session_run(session, "layer_norm_copy", inputs, 4, outputs, 3),
        KILN_OK)
        << kiln_status_message();
    kiln_layer_norm_forward_copy_host(
        x.data(), residual.data(), scale.data(), bias.data(), want.data(),
        wantSum.data(), 0, wantCopy.data(), 1, rows, cols, kLayerNormEpsilon);
    EXPECT_EQ(std::memcmp(sum.data(), wantSum.data(), n * 4), 0);
    expectClose(y, want, "y");
    expectHalfClose(copy, wantCopy, true, "y_rounded");
  }

  std::vector<float> wantDx(n), wantScale(cols), wantBias(cols),
      wantPartials(blocks * 2 * cols);
  kiln_layer_norm_backward_host(x.data(), scale.data(), grad.data(), nullptr,
                                wantDx.data(), wantScale.data(),
                                wantBias.data(), wantPartials.data(), nullptr,
                                0, rows, cols, kLayerNormEpsilon);
  std::vector<float> firstDx, firstScale, firstBias, firstPartials;
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE(run == 0 ? "the backward, directly" : "the backward, a graph");
    std::vector<float> dx(n, NAN), dscale(cols, NAN), dbias(cols, NAN),
        partials(blocks * 2 * cols, NAN);
    kiln_tensor_t inputs[] = {f32Tensor("x", x, matrixShape),
                              f32Tensor("scale", scale, vectorShape),
                              f32Tensor("grad", grad, matrixShape)};
    kiln_tensor_t outputs[] = {f32Tensor("dx", dx, matrixShape),
                               f32Tensor("dscale", dscale, vectorShape),
                               f32Tensor("dbias", dbias, vectorShape),
                               f32Tensor("partials", partials, partialsShape)};
    ASSERT_EQ(
        kiln_session_run(session, "layer_norm_grad", inputs, 3, outputs, 4),
        KILN_OK)
        << kiln_status_message();
    expectClose(dx, wantDx, "dx");
    expectClose(dscale, wantScale, "dscale");
    expectClose(dbias, wantBias, "dbias");
    expectClose(partials, wantPartials, "partials");
    if (run == 0) {
      firstDx = dx;
      firstScale = dscale;
      firstBias = dbias;
      firstPartials = partials;
      continue;
    }
    EXPECT_EQ(std::memcmp(dx.data(), firstDx.data(), n * 4), 0);
    EXPECT_EQ(firstScale, dscale);
    EXPECT_EQ(firstBias, dbias);
    EXPECT_EQ(firstPartials, partials);
  }

  {
    SCOPED_TRACE("the backward with an accumulated input gradient");
    std::vector<float> dx(n, NAN), dscale(cols, NAN), dbias(cols, NAN),
        partials(blocks * 2 * cols, NAN);
    kiln_layer_norm_backward_host(
        x.data(), scale.data(), grad.data(), accumulate.data(), wantDx.data(),
        wantScale.data(), wantBias.data(), wantPartials.data(), nullptr, 0,
        rows, cols, kLayerNormEpsilon);
    kiln_tensor_t inputs[] = {f32Tensor("x", x, matrixShape),
                              f32Tensor("scale", scale, vectorShape),
                              f32Tensor("grad", grad, matrixShape),
                              f32Tensor("accumulate", accumulate, matrixShape)};
    kiln_tensor_t outputs[] = {f32Tensor("dx", dx, matrixShape),
                               f32Tensor("dscale", dscale, vectorShape),
                               f32Tensor("dbias", dbias, vectorShape),
                               f32Tensor("partials", partials, partialsShape)};
    ASSERT_EQ(kiln_session_run(session, "layer_norm_grad_accumulate", inputs, 4,
                               outputs, 4),
              KILN_OK)
        << kiln_status_message();
    expectClose(dx, wantDx, "dx");
    expectClose(dscale, wantScale, "dscale");
    expectClose(dbias, wantBias, "dbias");
    expectClose(partials, wantPartials, "partials");
  }

  for (bool bf16 : {true, false}) {
    SCOPED_TRACE(bf16 ? "the backward accumulating, rounded to bf16"
                      : "the backward rounded to f16");
    std::vector<float> dx(n, NAN), dscale(cols, NAN), dbias(cols, NAN),
        partials(blocks * 2 * cols, NAN);
    std::vector<uint16_t> rounded(n, 0xffff), wantRounded(n);
    const float *accumulated = bf16 ? accumulate.data() : nullptr;
    kiln_layer_norm_backward_host(
        x.data(), scale.data(), grad.data(), accumulated, wantDx.data(),
        wantScale.data(), wantBias.data(), wantPartials.data(),
        wantRounded.data(), bf16 ? 1 : 2, rows, cols, kLayerNormEpsilon);
    kiln_tensor_t inputs[] = {f32Tensor("x", x, matrixShape),
                              f32Tensor("scale", scale, vectorShape),
                              f32Tensor("grad", grad, matrixShape),
                              f32Tensor("accumulate", accumulate, matrixShape)};
    kiln_tensor_t outputs[] = {
        f32Tensor("dx", dx, matrixShape),
        f32Tensor("dscale", dscale, vectorShape),
        f32Tensor("dbias", dbias, vectorShape),
        f32Tensor("partials", partials, partialsShape),
        {"dx_rounded", bf16 ? KILN_ELEMENT_TYPE_BF16 : KILN_ELEMENT_TYPE_F16, 2,
         matrixShape.data(), rounded.data(), n * 2}};
    ASSERT_EQ(kiln_session_run(session,
                               bf16 ? "layer_norm_grad_accumulate_bf16"
                                    : "layer_norm_grad_f16",
                               inputs, bf16 ? 4 : 3, outputs, 5),
              KILN_OK)
        << kiln_status_message();
    expectClose(dx, wantDx, "dx");
    expectClose(dscale, wantScale, "dscale");
    expectClose(dbias, wantBias, "dbias");
    expectClose(partials, wantPartials, "partials");
    expectHalfClose(rounded, wantRounded, bf16, "dx_rounded");
    int failures = 0;
    for (size_t i = 0; i < n && failures < 5; ++i)
      if (rounded[i] != narrowOf(dx[i], bf16)) {
        ADD_FAILURE() << "dx_rounded element " << i << ": 0x" << std::hex
                      << rounded[i] << ", not dx " << dx[i] << " rounded, 0x"
                      << narrowOf(dx[i], bf16) << std::dec;
        ++failures;
      }
  }

  kiln_session_release(session);
  kiln_bundle_release(bundle);
}

/// Runs the bias-gradient bundle's two products in a session made with
/// KILN_CUDA_BIAS_GRAD set to `mode` (cuBLASLt's epilogue, or a second
/// product with a vector of ones) and checks them against the host.
void checkBiasGrads(const char *mode) {
  SCOPED_TRACE(std::string("KILN_CUDA_BIAS_GRAD=") + mode);
  kiln_bundle_t *bundle = nullptr;
  kiln_session_t *session = nullptr;
  setenv("KILN_CUDA_BIAS_GRAD", mode, 1);
  openPtxSession(buildCudaBiasGradBundle, "kiln-cuda-bias-grad", &bundle,
                 &session);
  unsetenv("KILN_CUDA_BIAS_GRAD");
  if (!session)
    return;

  const int64_t rows = kBiasGradRows, in = kBiasGradIn, out = kBiasGradOut;
  // bf16 values (f32 truncated): exact on both sides.
  auto bf16 = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return static_cast<uint16_t>(u >> 16);
  };
  auto wide = [](uint16_t h) {
    uint32_t u = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  std::vector<uint16_t> dy(rows * out), x(rows * in);
  for (size_t i = 0; i < dy.size(); ++i)
    dy[i] = bf16(std::sin(0.31f * i) + 0.25f);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = bf16(std::cos(0.17f * i));
  std::vector<double> wantDb(out, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < out; ++j)
      wantDb[j] += wide(dy[r * out + j]);
  auto tensor = [](const char *name, std::vector<uint16_t> &data,
                   const std::vector<int64_t> &dims) {
    return kiln_tensor_t{name,
                         KILN_ELEMENT_TYPE_BF16,
                         static_cast<int32_t>(dims.size()),
                         dims.data(),
                         data.data(),
                         data.size() * 2};
  };
  std::vector<int64_t> dyShape{rows, out}, xShape{rows, in},
      outInShape{out, in}, inOutShape{in, out}, dbShape{out};
  for (bool outIn : {true, false}) {
    SCOPED_TRACE(outIn ? "weight_out_in" : "weight_in_out");
    std::vector<float> dw(out * in, NAN), db(out, NAN);
    kiln_tensor_t inputs[] = {
        outIn ? tensor("dy", dy, dyShape) : tensor("x", x, xShape),
        outIn ? tensor("x", x, xShape) : tensor("dy", dy, dyShape)};
    kiln_tensor_t outputs[] = {
        f32Tensor("dw", dw, outIn ? outInShape : inOutShape),
        f32Tensor("db", db, dbShape)};
    ASSERT_EQ(kiln_session_run(session,
                               outIn ? "weight_out_in" : "weight_in_out",
                               inputs, 2, outputs, 2),
              KILN_OK)
        << kiln_status_message();
    for (int64_t j = 0; j < out; ++j)
      EXPECT_NEAR(db[j], wantDb[j], 1e-4 * (1 + std::fabs(wantDb[j])))
          << "db " << j;
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) {
        double want = 0;
        for (int64_t r = 0; r < rows; ++r)
          want += double(wide(dy[r * out + o])) * wide(x[r * in + i]);
        float got = outIn ? dw[o * in + i] : dw[i * out + o];
        EXPECT_NEAR(got, want, 1e-4 * (1 + std::fabs(want)))
            << "dw " << o << ", " << i;
      }
  }
  kiln_session_release(session);
  kiln_bundle_release(bundle);
}

TEST(CudaGemm, BiasGradientsMatchTheHost) {
  checkBiasGrads("epilogue");
  checkBiasGrads("product");
}

INSTANTIATE_TEST_SUITE_P(
    Images, CudaSession, ::testing::Values("ptx.kiln", "cubin.kiln"),
    [](const ::testing::TestParamInfo<const char *> &info) {
      return std::string(info.param)
          .substr(0, std::string(info.param).find('.'));
    });

} // namespace
