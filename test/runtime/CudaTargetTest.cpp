//===- CudaTargetTest.cpp - CUDA targets, on a machine of any kind --------===//
//
// What needs no GPU: which code image a device of a given compute
// capability loads, how the C API describes a CUDA target and its programs
// (all-reduces included), that a bundle with CPU and CUDA code still runs on
// the CPU, and that a CUDA session on a machine without an NVIDIA driver
// fails cleanly, saying so.
//
//===----------------------------------------------------------------------===//

#include "OpenWrittenBundle.h"
#include "TestBundles.h"
#include "bundle/CudaImages.h"
#include "kiln/runtime.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <dlfcn.h>
#include <string>
#include <unistd.h>

using namespace kiln::runtime;
using namespace kiln::runtime::testing;
namespace bp = kiln::bundle;

namespace {

bp::Target
targetWith(std::initializer_list<std::pair<bp::CodeImage::Format, const char *>>
               images) {
  bp::Target target;
  target.set_name("cuda");
  for (const auto &[format, arch] : images) {
    bp::CodeImage *image = target.add_images();
    image->set_format(format);
    image->set_arch(arch);
  }
  return target;
}

constexpr auto kCubin = bp::CodeImage::CUBIN;
constexpr auto kPtx = bp::CodeImage::PTX;

TEST(CudaImages, PicksTheCubinThatRunsOnTheDevice) {
  bp::Target target = targetWith({{kCubin, "sm_80"},
                                  {kCubin, "sm_90a"},
                                  {kCubin, "sm_90"},
                                  {kPtx, "compute_90a"},
                                  {kPtx, "compute_80"}});
  // An arch-specific cubin first on exactly its device.
  EXPECT_EQ(selectCudaImage(target, 9, 0), 1);
  // A plain cubin on later minor versions of its major one.
  EXPECT_EQ(selectCudaImage(target, 8, 0), 0);
  EXPECT_EQ(selectCudaImage(target, 8, 9), 0);
  // No cubin for 10.0 (sm_90 is another major version): the newest plain
  // PTX below it; compute_90a is only for 9.0.
  EXPECT_EQ(selectCudaImage(target, 10, 0), 4);
  // Nothing for an older device.
  EXPECT_EQ(selectCudaImage(target, 7, 5), -1);
}

TEST(CudaImages, ArchSpecificCodeRunsOnlyOnItsVersion) {
  bp::Target target = targetWith({{kCubin, "sm_90a"}, {kPtx, "compute_90a"}});
  EXPECT_EQ(selectCudaImage(target, 9, 0), 0);
  EXPECT_EQ(selectCudaImage(target, 10, 0), -1);
  EXPECT_EQ(selectCudaImage(target, 8, 6), -1);
  bp::Target ptxOnly =
      targetWith({{kPtx, "compute_90a"}, {kPtx, "compute_86"}});
  EXPECT_EQ(selectCudaImage(ptxOnly, 9, 0), 0);
  EXPECT_EQ(selectCudaImage(ptxOnly, 12, 0), 1);
}

TEST(CudaImages, FamilyCodeRunsWithinItsMajorVersion) {
  bp::Target target = targetWith({{kCubin, "sm_100f"}, {kPtx, "compute_100f"}});
  EXPECT_EQ(selectCudaImage(target, 10, 3), 0);
  bp::Target ptx = targetWith({{kPtx, "compute_100f"}});
  EXPECT_EQ(selectCudaImage(ptx, 10, 3), 0);
  EXPECT_EQ(selectCudaImage(ptx, 12, 0), -1);
}

TEST(CudaImages, IgnoresMalformedArchitectures) {
  bp::Target target = targetWith({{kCubin, "sm_"},
                                  {kCubin, "sm_9x"},
                                  {kCubin, "compute_90"},
                                  {kPtx, "sm_80"},
                                  {kPtx, "compute_8"}});
  EXPECT_EQ(selectCudaImage(target, 9, 0), -1);
}

TEST(CudaImages, DescribesTheImagesByFormat) {
  EXPECT_EQ(
      describeCudaImages(targetWith(
          {{kCubin, "sm_80"}, {kCubin, "sm_90a"}, {kPtx, "compute_90a"}})),
      "sm_80 sm_90a cubin, compute_90a ptx");
  EXPECT_EQ(describeCudaImages(targetWith({{kPtx, "compute_80"}})),
            "compute_80 ptx");
  EXPECT_EQ(describeCudaImages(targetWith({})), "");
}

/// The hybrid bundle, with real CPU code and PTX, written once.
class HybridBundle : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    const char *base = std::getenv("TMPDIR");
    dir = std::string(base && *base ? base : "/tmp") + "/kiln-hybrid-XXXXXX";
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
    std::string kernels = dir + "/kernels.so", code, ptx;
    Status status =
        compileSharedObject(KILN_TEST_CC, KILN_TEST_KERNELS_SOURCE, kernels);
    ASSERT_TRUE(status.ok()) << status.message();
    ASSERT_TRUE(readFile(kernels, code).ok());
    ASSERT_TRUE(readFile(KILN_TEST_PTX_SOURCE, ptx).ok());
    BundleWriter writer;
    buildHybridBundle(writer, code, ptx);
    status = writer.write(dir + "/hybrid.kiln");
    ASSERT_TRUE(status.ok()) << status.message();
  }

  static void TearDownTestSuite() {
    std::string command = "rm -rf '" + dir + "'";
    EXPECT_EQ(std::system(command.c_str()), 0);
  }

  void SetUp() override {
    ASSERT_EQ(kiln_bundle_open((dir + "/hybrid.kiln").c_str(), &bundle),
              KILN_OK)
        << kiln_status_message();
  }

  void TearDown() override { kiln_bundle_release(bundle); }

  static std::string dir;
  kiln_bundle_t *bundle = nullptr;
};

std::string HybridBundle::dir;

TEST_F(HybridBundle, DescribesBothTargets) {
  kiln_target_info_t cpu, cuda;
  ASSERT_EQ(kiln_bundle_get_target(bundle, 0, &cpu), KILN_OK);
  ASSERT_EQ(kiln_bundle_get_target(bundle, 1, &cuda), KILN_OK);
  EXPECT_STREQ(cpu.name, "cpu");
  EXPECT_STREQ(cpu.images, "");
  EXPECT_STREQ(cuda.name, "cuda");
  EXPECT_STREQ(cuda.triple, "nvptx64-nvidia-cuda");
  EXPECT_STREQ(cuda.images, "compute_80 ptx");
  EXPECT_EQ(cuda.kernel_count, 5u);
  std::string ptx;
  ASSERT_TRUE(readFile(KILN_TEST_PTX_SOURCE, ptx).ok());
  EXPECT_EQ(cuda.code_bytes, ptx.size());
}

TEST_F(HybridBundle, DescribesTheCudaProgram) {
  kiln_program_info_t program;
  ASSERT_EQ(kiln_bundle_get_program(bundle, 0, "cuda", &program), KILN_OK)
      << kiln_status_message();
  EXPECT_EQ(program.command_count, 1u);
  EXPECT_EQ(program.launch_count, 1u);
  EXPECT_EQ(program.gemm_count, 0u);
  EXPECT_EQ(program.arena_bytes, 0u);
  EXPECT_EQ(program.collective_count, 0u);
  // The CPU's program is the entry point's own; no entry point 99.
  EXPECT_EQ(kiln_bundle_get_program(bundle, 0, "cpu", &program),
            KILN_STATUS_NOT_FOUND);
  EXPECT_NE(std::string(kiln_status_message())
                .find("entry point 'add_one' has no program for target 'cpu'"),
            std::string::npos)
      << kiln_status_message();
  EXPECT_EQ(kiln_bundle_get_program(bundle, 99, "cuda", &program),
            KILN_STATUS_NOT_FOUND);
  EXPECT_EQ(kiln_bundle_get_program(bundle, 0, nullptr, &program),
            KILN_STATUS_INVALID_ARGUMENT);
}

/// The all-reduces and waits of a data-parallel CUDA program count as
/// commands, the all-reduces also on their own.
TEST(CudaProgramInfo, CountsTheAllReduces) {
  BundleWriter writer;
  buildCudaAllReduceBundle(writer, standInPtxImages());
  kiln_bundle_t *bundle = nullptr;
  ASSERT_NO_FATAL_FAILURE(
      openWrittenBundle(writer, "kiln-all-reduce", &bundle));
  kiln_program_info_t program;
  ASSERT_EQ(kiln_bundle_get_program(bundle, 0, "cuda", &program), KILN_OK)
      << kiln_status_message();
  EXPECT_EQ(program.command_count, 7u);
  EXPECT_EQ(program.launch_count, 3u);
  EXPECT_EQ(program.gemm_count, 0u);
  EXPECT_EQ(program.collective_count, 2u);
  EXPECT_EQ(program.arena_bytes, 128u);
  kiln_bundle_release(bundle);
}

/// Attention commands count as commands and on their own, not as launches.
TEST(CudaProgramInfo, CountsTheAttentionCommands) {
  BundleWriter writer;
  buildCudaAttentionBundle(writer, standInPtxImages());
  kiln_bundle_t *bundle = nullptr;
  ASSERT_NO_FATAL_FAILURE(openWrittenBundle(writer, "kiln-attention", &bundle));
  for (size_t entry = 0; entry < 3; ++entry) {
    kiln_program_info_t program;
    ASSERT_EQ(kiln_bundle_get_program(bundle, entry, "cuda", &program), KILN_OK)
        << kiln_status_message();
    EXPECT_EQ(program.command_count, 1u) << entry;
    EXPECT_EQ(program.attention_count, 1u) << entry;
    EXPECT_EQ(program.launch_count, 0u) << entry;
  }
  kiln_bundle_release(bundle);
}

/// Layer-norm commands count as commands and on their own, not as launches.
TEST(CudaProgramInfo, CountsTheLayerNormCommands) {
  BundleWriter writer;
  buildCudaLayerNormBundle(writer, standInPtxImages());
  kiln_bundle_t *bundle = nullptr;
  ASSERT_NO_FATAL_FAILURE(
      openWrittenBundle(writer, "kiln-layer-norm", &bundle));
  for (size_t entry = 0; entry < 8; ++entry) {
    kiln_program_info_t program;
    ASSERT_EQ(kiln_bundle_get_program(bundle, entry, "cuda", &program), KILN_OK)
        << kiln_status_message();
    EXPECT_EQ(program.command_count, 1u) << entry;
    EXPECT_EQ(program.layer_norm_count, 1u) << entry;
    EXPECT_EQ(program.attention_count, 0u) << entry;
    EXPECT_EQ(program.launch_count, 0u) << entry;
  }
  kiln_bundle_release(bundle);
}

TEST_F(HybridBundle, RunsOnTheCpu) {
  for (const char *target : {static_cast<const char *>(nullptr), "cpu"}) {
    kiln_session_t *session = nullptr;
    ASSERT_EQ(kiln_session_create(bundle, target, &session), KILN_OK)
        << kiln_status_message();
    float x[4] = {0, 1, 2, -3}, y[4] = {};
    const int64_t shape[] = {4};
    kiln_tensor_t input = {"x", KILN_ELEMENT_TYPE_F32, 1, shape, x, 16};
    kiln_tensor_t output = {"y", KILN_ELEMENT_TYPE_F32, 1, shape, y, 16};
    EXPECT_EQ(kiln_session_run(session, "add_one", &input, 1, &output, 1),
              KILN_OK)
        << kiln_status_message();
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(y[i], x[i] + 1) << i;
    kiln_session_release(session);
  }
}

/// Where this machine can run CUDA, kiln-cuda-unittests covers the session;
/// here it must fail with Unsupported and say what is missing.
TEST_F(HybridBundle, CudaSessionWithoutADriverIsUnsupported) {
  kiln_session_t *session = nullptr;
  kiln_status_t status = kiln_session_create(bundle, "cuda", &session);
  if (status == KILN_OK) {
    kiln_session_release(session);
    GTEST_SKIP() << "this machine runs CUDA; kiln-cuda-unittests tests it";
  }
  std::string message = kiln_status_message();
  EXPECT_EQ(status, KILN_STATUS_UNSUPPORTED) << message;
  EXPECT_EQ(session, nullptr);
  EXPECT_EQ(message.rfind(dir + "/hybrid.kiln: target 'cuda' ", 0), 0u)
      << message;
#ifdef KILN_TEST_CUDA_BACKEND
  void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver) {
    dlclose(driver);
    return; // a driver without a usable device: any Unsupported message
  }
  EXPECT_NE(message.find("target 'cuda' needs an NVIDIA driver: libcuda.so.1: "
                         "cannot open shared object file"),
            std::string::npos)
      << message;
#else
  EXPECT_NE(message.find("built without CUDA support"), std::string::npos)
      << message;
#endif
}

} // namespace
