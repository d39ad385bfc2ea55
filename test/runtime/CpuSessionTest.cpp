//===- CpuSessionTest.cpp - the C API running real CPU code ---------------===//
//
// Compiles kernels.c with the system C compiler into a shared object, wraps
// it in bundles with the BundleWriter and runs them through the C API: the
// queries, every entry point, parameters updated in place, and every error
// a caller can provoke. Needs no part of the compiler.
//
//===----------------------------------------------------------------------===//

#include "TestBundles.h"
#include "kiln/abi/collectives.h"
#include "kiln/runtime.h"
#include "kiln/runtime/BundleReader.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <unistd.h>

using namespace kiln::runtime;
using namespace kiln::runtime::testing;
namespace bp = kiln::bundle;

namespace {

/// Bundles written once for the whole suite.
class CpuSession : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    const char *base = std::getenv("TMPDIR");
    dir = std::string(base && *base ? base : "/tmp") + "/kiln-cpu-XXXXXX";
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
    std::string kernels = dir + "/kernels.so";
    Status status =
        compileSharedObject(KILN_TEST_CC, KILN_TEST_KERNELS_SOURCE, kernels);
    ASSERT_TRUE(status.ok()) << status.message();
    ASSERT_TRUE(readFile(kernels, code).ok());
    writeBundle("multi.kiln",
                [](BundleWriter &w) { buildMultiBundle(w, code); });
    writeBundle("single.kiln",
                [](BundleWriter &w) { buildSingleBundle(w, code); });
    writeBundle("unstored.kiln",
                [](BundleWriter &w) { buildUnstoredBundle(w, code); });
    // b (stored) and acc (zeros) fixed: the code relies on their values.
    writeBundle("fixed.kiln", [](BundleWriter &w) {
      buildUnstoredBundle(w, code);
      w.manifest().mutable_parameters(1)->set_fixed(true);
      w.manifest().mutable_parameters(2)->set_fixed(true);
    });
    writeBundle("not-elf.kiln", [](BundleWriter &w) {
      buildSingleBundle(w, std::string(300, 'Z'));
    });
    writeBundle("multi-metadata.kiln", [](BundleWriter &w) {
      buildMultiBundle(w, code);
      addMetadata(w, {{"training.grad_accum", "4"}, {"zeta", ""}});
    });
    writeBundle("train-dp2.kiln", [](BundleWriter &w) {
      buildDataParallelTrainBundle(w, code, 2);
    });
    writeBundle("missing-kernel.kiln", [](BundleWriter &w) {
      buildSingleBundle(w, code);
      w.manifest().mutable_targets(0)->add_kernels("softmax_kernel");
    });
  }

  static void TearDownTestSuite() {
    std::string command = "rm -rf '" + dir + "'";
    EXPECT_EQ(std::system(command.c_str()), 0);
  }

  template <typename Build>
  static void writeBundle(const std::string &name, Build build) {
    BundleWriter writer;
    build(writer);
    Status status = writer.write(dir + "/" + name);
    ASSERT_TRUE(status.ok()) << status.message();
  }

  static std::string path(const std::string &name) { return dir + "/" + name; }

  static void addMetadata(
      BundleWriter &writer,
      std::initializer_list<std::pair<const char *, const char *>> entries) {
    for (const auto &[key, value] : entries) {
      bp::MetadataEntry *entry = writer.manifest().add_metadata();
      entry->set_key(key);
      entry->set_value(value);
    }
  }

  /// A copy of the bundle at `file` whose weights differ in one bit; the
  /// manifest and the code are the same bytes.
  static std::string withFirstWeightByteFlipped(const std::string &file) {
    std::unique_ptr<BundleReader> reader;
    Status status = BundleReader::open(file, reader);
    EXPECT_TRUE(status.ok()) << status.message();
    std::vector<std::string> contents;
    std::vector<SectionContent> sections;
    for (uint32_t i = 0; i < reader->sections().size(); ++i) {
      ByteSpan bytes = reader->sectionBytes(i);
      contents.emplace_back(reinterpret_cast<const char *>(bytes.data),
                            bytes.size);
    }
    contents[reader->manifest().weights_section()][0] ^= 1;
    for (uint32_t i = 0; i < contents.size(); ++i)
      sections.push_back({static_cast<SectionKind>(reader->sections()[i].kind),
                          reader->sections()[i].name, ByteSpan(contents[i])});
    std::string changed = file + ".weights.kiln";
    std::ofstream(changed, std::ios::binary) << encodeBundle(sections);
    return changed;
  }

  static uint64_t fingerprintOf(const std::string &file) {
    kiln_bundle_t *opened = nullptr;
    EXPECT_EQ(kiln_bundle_open(file.c_str(), &opened), KILN_OK)
        << kiln_status_message();
    uint64_t fingerprint = 0;
    EXPECT_EQ(kiln_bundle_get_fingerprint(opened, &fingerprint), KILN_OK)
        << kiln_status_message();
    kiln_bundle_release(opened);
    return fingerprint;
  }

  void SetUp() override {
    ASSERT_EQ(kiln_bundle_open(path("multi.kiln").c_str(), &bundle), KILN_OK)
        << kiln_status_message();
    ASSERT_EQ(kiln_session_create(bundle, nullptr, &session), KILN_OK)
        << kiln_status_message();
  }

  void TearDown() override {
    kiln_session_release(session);
    kiln_bundle_release(bundle);
  }

  static std::string dir;
  static std::string code;
  kiln_bundle_t *bundle = nullptr;
  kiln_session_t *session = nullptr;
};

std::string CpuSession::dir;
std::string CpuSession::code;

const int64_t kShape4[] = {4};
const int64_t kShape2x2[] = {2, 2};
const int64_t kShape3[] = {3};

kiln_tensor_t f32Tensor(const char *name, float *data, const int64_t *shape,
                        int32_t rank) {
  size_t count = 1;
  for (int32_t d = 0; d < rank; ++d)
    count *= static_cast<size_t>(shape[d]);
  return {name, KILN_ELEMENT_TYPE_F32, rank, shape,
          data, count * sizeof(float)};
}

void expectStatus(kiln_status_t status, kiln_status_t expected,
                  const std::string &fragment) {
  EXPECT_EQ(status, expected) << kiln_status_message();
  EXPECT_NE(std::string(kiln_status_message()).find(fragment),
            std::string::npos)
      << "message: " << kiln_status_message()
      << "\nexpected to contain: " << fragment;
}

TEST_F(CpuSession, DescribesTheBundle) {
  kiln_bundle_info_t info;
  ASSERT_EQ(kiln_bundle_get_info(bundle, &info), KILN_OK);
  EXPECT_STREQ(info.producer, "kiln runtime tests");
  EXPECT_STREQ(info.model_name, "multi");
  EXPECT_EQ(info.entry_point_count, 4u);
  EXPECT_EQ(info.target_count, 1u);
  EXPECT_EQ(info.parameter_count, 3u);
  EXPECT_EQ(info.parameter_bytes, 48u);

  size_t index = 0;
  ASSERT_EQ(kiln_bundle_find_entry_point(bundle, "mixed", &index), KILN_OK);
  EXPECT_EQ(index, 2u);
  kiln_entry_point_info_t entry;
  ASSERT_EQ(kiln_bundle_get_entry_point(bundle, 1, &entry), KILN_OK);
  EXPECT_STREQ(entry.name, "affine");
  EXPECT_EQ(entry.input_count, 1u);
  EXPECT_EQ(entry.output_count, 1u);
  EXPECT_EQ(entry.command_count, 2u);
  EXPECT_EQ(entry.arena_bytes, 128u);

  kiln_tensor_info_t tensor;
  ASSERT_EQ(kiln_bundle_get_entry_point_input(bundle, 2, 1, &tensor), KILN_OK);
  EXPECT_STREQ(tensor.name, "flag");
  EXPECT_EQ(tensor.element_type, KILN_ELEMENT_TYPE_BOOL);
  ASSERT_EQ(tensor.rank, 1);
  EXPECT_EQ(tensor.shape[0], 3);
  EXPECT_EQ(tensor.byte_size, 3u);
  ASSERT_EQ(kiln_bundle_get_entry_point_output(bundle, 2, 0, &tensor), KILN_OK);
  EXPECT_STREQ(tensor.name, "out");
  EXPECT_EQ(tensor.byte_size, 24u);

  kiln_parameter_info_t parameter;
  ASSERT_EQ(kiln_bundle_get_parameter(bundle, 1, &parameter), KILN_OK);
  EXPECT_STREQ(parameter.tensor.name, "b");
  EXPECT_EQ(parameter.trainable, 0);
  EXPECT_EQ(parameter.tensor.rank, 2);
  kiln_target_info_t target;
  ASSERT_EQ(kiln_bundle_get_target(bundle, 0, &target), KILN_OK);
  EXPECT_STREQ(target.name, "cpu");
  EXPECT_STREQ(target.triple, "x86_64-unknown-linux-gnu");
  EXPECT_EQ(target.kernel_count, 5u);
  EXPECT_EQ(target.code_bytes, code.size());
}

TEST_F(CpuSession, ReadsMetadata) {
  kiln_bundle_info_t info;
  ASSERT_EQ(kiln_bundle_get_info(bundle, &info), KILN_OK);
  EXPECT_EQ(info.metadata_count, 0u);
  const char *value = "unchanged";
  expectStatus(kiln_bundle_get_metadata(bundle, "training.grad_accum", &value),
               KILN_STATUS_NOT_FOUND,
               "multi.kiln: no metadata entry 'training.grad_accum'");
  EXPECT_STREQ(value, "unchanged");

  kiln_bundle_t *tagged = nullptr;
  ASSERT_EQ(kiln_bundle_open(path("multi-metadata.kiln").c_str(), &tagged),
            KILN_OK)
      << kiln_status_message();
  ASSERT_EQ(kiln_bundle_get_info(tagged, &info), KILN_OK);
  EXPECT_EQ(info.metadata_count, 2u);
  ASSERT_EQ(kiln_bundle_get_metadata(tagged, "training.grad_accum", &value),
            KILN_OK);
  EXPECT_STREQ(value, "4");
  ASSERT_EQ(kiln_bundle_get_metadata(tagged, "zeta", &value), KILN_OK);
  EXPECT_STREQ(value, "");
  const char *key = nullptr;
  ASSERT_EQ(kiln_bundle_get_metadata_entry(tagged, 1, &key, &value), KILN_OK);
  EXPECT_STREQ(key, "zeta");
  expectStatus(kiln_bundle_get_metadata_entry(tagged, 2, &key, &value),
               KILN_STATUS_NOT_FOUND, "no metadata entry 2 (there are 2)");
  expectStatus(kiln_bundle_get_metadata(tagged, "training", &value),
               KILN_STATUS_NOT_FOUND, "no metadata entry 'training'");
  expectStatus(kiln_bundle_get_metadata(tagged, nullptr, &value),
               KILN_STATUS_INVALID_ARGUMENT,
               "kiln_bundle_get_metadata: key is NULL");
  kiln_bundle_release(tagged);
}

TEST_F(CpuSession, FingerprintIdentifiesTheBundleNotThePath) {
  std::string copy = path("multi-copy.kiln");
  std::string command = "cp '" + path("multi.kiln") + "' '" + copy + "'";
  ASSERT_EQ(std::system(command.c_str()), 0);
  uint64_t original = fingerprintOf(path("multi.kiln"));
  EXPECT_EQ(fingerprintOf(copy), original);
  // Written again by the same code: the same bytes, the same fingerprint.
  writeBundle("multi-again.kiln",
              [](BundleWriter &w) { buildMultiBundle(w, code); });
  EXPECT_EQ(fingerprintOf(path("multi-again.kiln")), original);
  // Another manifest, other weights, other code: each changes it.
  EXPECT_NE(fingerprintOf(path("multi-metadata.kiln")), original);
  EXPECT_NE(fingerprintOf(withFirstWeightByteFlipped(path("multi.kiln"))),
            original);
  writeBundle("multi-code.kiln",
              [](BundleWriter &w) { buildMultiBundle(w, code + '\0'); });
  EXPECT_NE(fingerprintOf(path("multi-code.kiln")), original);
  uint64_t fingerprint = 0;
  expectStatus(kiln_bundle_get_fingerprint(bundle, nullptr),
               KILN_STATUS_INVALID_ARGUMENT, "out_fingerprint is NULL");
  ASSERT_EQ(kiln_bundle_get_fingerprint(bundle, &fingerprint), KILN_OK);
  EXPECT_EQ(fingerprint, original);
}

TEST_F(CpuSession, QueriesOutOfRangeAreNotFound) {
  kiln_entry_point_info_t entry;
  expectStatus(kiln_bundle_get_entry_point(bundle, 4, &entry),
               KILN_STATUS_NOT_FOUND, "no entry point 4 (there are 4)");
  kiln_tensor_info_t tensor;
  expectStatus(kiln_bundle_get_entry_point_input(bundle, 0, 1, &tensor),
               KILN_STATUS_NOT_FOUND,
               "entry point 'add_one': no input 1 (there are 1)");
  expectStatus(kiln_bundle_get_entry_point_output(bundle, 9, 0, &tensor),
               KILN_STATUS_NOT_FOUND, "no entry point 9");
  kiln_parameter_info_t parameter;
  expectStatus(kiln_bundle_get_parameter(bundle, 3, &parameter),
               KILN_STATUS_NOT_FOUND, "no parameter 3 (there are 3)");
  kiln_target_info_t target;
  expectStatus(kiln_bundle_get_target(bundle, 1, &target),
               KILN_STATUS_NOT_FOUND, "no target 1");
  size_t index = 0;
  expectStatus(kiln_bundle_find_entry_point(bundle, "train_step", &index),
               KILN_STATUS_NOT_FOUND,
               "no entry point 'train_step' (entry points: 'add_one', "
               "'affine', 'mixed', 'accumulate')");
}

TEST_F(CpuSession, NullArgumentsAreInvalid) {
  kiln_bundle_t *none = nullptr;
  expectStatus(kiln_bundle_open(nullptr, &none), KILN_STATUS_INVALID_ARGUMENT,
               "kiln_bundle_open: path is NULL");
  expectStatus(kiln_bundle_get_info(bundle, nullptr),
               KILN_STATUS_INVALID_ARGUMENT,
               "kiln_bundle_get_info: out_info is NULL");
  expectStatus(kiln_session_run(session, nullptr, nullptr, 0, nullptr, 0),
               KILN_STATUS_INVALID_ARGUMENT,
               "kiln_session_run: entry_point is NULL");
  expectStatus(kiln_session_create(nullptr, nullptr, nullptr),
               KILN_STATUS_INVALID_ARGUMENT,
               "kiln_session_create: bundle is NULL");
  kiln_session_release(nullptr);
  kiln_bundle_release(nullptr);
}

TEST_F(CpuSession, ReportsTheArenaItAllocated) {
  // The multi bundle's largest arena is affine's 128 bytes.
  uint64_t bytes = 0;
  ASSERT_EQ(kiln_session_get_arena_bytes(session, &bytes), KILN_OK)
      << kiln_status_message();
  EXPECT_EQ(bytes, 128u);
  expectStatus(kiln_session_get_arena_bytes(session, nullptr),
               KILN_STATUS_INVALID_ARGUMENT,
               "kiln_session_get_arena_bytes: out_bytes is NULL");
  expectStatus(kiln_session_get_arena_bytes(nullptr, &bytes),
               KILN_STATUS_INVALID_ARGUMENT,
               "kiln_session_get_arena_bytes: session is NULL");
}

TEST_F(CpuSession, RunsAddOne) {
  float x[4] = {1, 2, 3, 4.5f}, y[4] = {};
  kiln_tensor_t input = f32Tensor("x", x, kShape4, 1);
  kiln_tensor_t output = f32Tensor("y", y, kShape4, 1);
  ASSERT_EQ(kiln_session_run(session, "add_one", &input, 1, &output, 1),
            KILN_OK)
      << kiln_status_message();
  EXPECT_EQ(y[0], 2);
  EXPECT_EQ(y[3], 5.5f);
}

TEST_F(CpuSession, RunsThroughTheArenaAndParameters) {
  float x[4] = {1, -1, 0.5f, 2}, y[4] = {};
  kiln_tensor_t input = f32Tensor("x", x, kShape2x2, 2);
  kiln_tensor_t output = f32Tensor("y", y, kShape2x2, 2);
  ASSERT_EQ(kiln_session_run(session, "affine", &input, 1, &output, 1), KILN_OK)
      << kiln_status_message();
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(y[i], x[i] * kWeightW[i] + kWeightB[i]) << i;
}

/// Parameters without a stored value: zeros, or set by the caller before
/// any run (until then every run is refused, naming one).
TEST_F(CpuSession, ParametersWithoutStoredValues) {
  kiln_bundle_t *unstored = nullptr;
  ASSERT_EQ(kiln_bundle_open(path("unstored.kiln").c_str(), &unstored), KILN_OK)
      << kiln_status_message();
  kiln_session_t *s = nullptr;
  ASSERT_EQ(kiln_session_create(unstored, "cpu", &s), KILN_OK)
      << kiln_status_message();
  float acc[4] = {1, 1, 1, 1}, b[4] = {};
  ASSERT_EQ(kiln_session_get_parameter(s, "acc", acc, sizeof(acc)), KILN_OK);
  ASSERT_EQ(kiln_session_get_parameter(s, "b", b, sizeof(b)), KILN_OK);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(acc[i], 0.0f) << i;
    EXPECT_EQ(b[i], kWeightB[i]) << i;
  }

  float x[4] = {1, -1, 0.5f, 2}, y[4] = {};
  kiln_tensor_t input = f32Tensor("x", x, kShape2x2, 2);
  kiln_tensor_t output = f32Tensor("y", y, kShape2x2, 2);
  EXPECT_EQ(kiln_session_run(s, "affine", &input, 1, &output, 1),
            KILN_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_status_message())
                .find("unstored.kiln: parameter 'w' has no value (1 "
                      "parameters in all): the bundle was compiled with "
                      "--external-weights"),
            std::string::npos)
      << kiln_status_message();

  ASSERT_EQ(kiln_session_set_parameter(s, "w", kWeightW, sizeof(kWeightW)),
            KILN_OK);
  ASSERT_EQ(kiln_session_run(s, "affine", &input, 1, &output, 1), KILN_OK)
      << kiln_status_message();
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(y[i], x[i] * kWeightW[i] + kWeightB[i]) << i;
  kiln_session_release(s);
  kiln_bundle_release(unstored);
}

/// A fixed parameter (kilnc compiled its value into the code) takes its own
/// value again, stored or zeros, and refuses any other, naming it; the
/// others are set as ever.
TEST_F(CpuSession, FixedParametersKeepTheirValue) {
  kiln_bundle_t *fixed = nullptr;
  ASSERT_EQ(kiln_bundle_open(path("fixed.kiln").c_str(), &fixed), KILN_OK)
      << kiln_status_message();
  kiln_parameter_info_t info;
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(kiln_bundle_get_parameter(fixed, i, &info), KILN_OK);
    EXPECT_EQ(info.fixed, i == 0 ? 0 : 1) << info.tensor.name;
  }
  ASSERT_EQ(kiln_bundle_get_parameter(bundle, 1, &info), KILN_OK);
  EXPECT_EQ(info.fixed, 0);
  kiln_session_t *s = nullptr;
  ASSERT_EQ(kiln_session_create(fixed, "cpu", &s), KILN_OK)
      << kiln_status_message();
  // The session keeps the values: the bundle may go first.
  kiln_bundle_release(fixed);
  float b[4], acc[4] = {};
  std::memcpy(b, kWeightB, sizeof(b));
  EXPECT_EQ(kiln_session_set_parameter(s, "b", b, sizeof(b)), KILN_OK)
      << kiln_status_message();
  EXPECT_EQ(kiln_session_set_parameter(s, "acc", acc, sizeof(acc)), KILN_OK)
      << kiln_status_message();
  EXPECT_EQ(kiln_session_set_parameter(s, "w", kWeightB, sizeof(kWeightB)),
            KILN_OK)
      << kiln_status_message();
  b[3] = 2.5f;
  acc[0] = -0.0f; // other bytes than 0, though equal as floats
  const char *refused =
      "' is fixed: kilnc compiled its value into the bundle's code (a causal "
      "attention mask), so it cannot take another";
  expectStatus(kiln_session_set_parameter(s, "b", b, sizeof(b)),
               KILN_STATUS_INVALID_ARGUMENT,
               std::string("parameter 'b") + refused);
  expectStatus(kiln_session_set_parameter(s, "acc", acc, sizeof(acc)),
               KILN_STATUS_INVALID_ARGUMENT,
               std::string("parameter 'acc") + refused);
  // Refused, it kept its value.
  ASSERT_EQ(kiln_session_get_parameter(s, "b", b, sizeof(b)), KILN_OK);
  EXPECT_EQ(b[3], kWeightB[3]);
  kiln_session_release(s);
}

TEST_F(CpuSession, RunsMixedElementTypes) {
  int64_t n[3] = {3, -4, 5};
  uint8_t flag[3] = {1, 0, 1};
  double out[3] = {};
  kiln_tensor_t inputs[2] = {
      {"flag", KILN_ELEMENT_TYPE_BOOL, 1, kShape3, flag, sizeof(flag)},
      {"n", KILN_ELEMENT_TYPE_I64, 1, kShape3, n, sizeof(n)}};
  kiln_tensor_t output = {"out",      KILN_ELEMENT_TYPE_F64, 1, kShape3, out,
                          sizeof(out)};
  ASSERT_EQ(kiln_session_run(session, "mixed", inputs, 2, &output, 1), KILN_OK)
      << kiln_status_message();
  EXPECT_EQ(out[0], 6.0);
  EXPECT_EQ(out[1], 4.0);
  EXPECT_EQ(out[2], 10.0);
}

void runAccumulate(kiln_session_t *session, float *x, float *y) {
  kiln_tensor_t input = f32Tensor("x", x, kShape4, 1);
  kiln_tensor_t output = f32Tensor("y", y, kShape4, 1);
  ASSERT_EQ(kiln_session_run(session, "accumulate", &input, 1, &output, 1),
            KILN_OK)
      << kiln_status_message();
}

TEST_F(CpuSession, ParametersUpdateInPlacePerSession) {
  float x[4] = {1, 1, 2, 2}, y[4] = {};
  runAccumulate(session, x, y);
  runAccumulate(session, x, y);
  EXPECT_EQ(y[0], 12);
  EXPECT_EQ(y[3], 44);
  float acc[4] = {};
  ASSERT_EQ(kiln_session_get_parameter(session, "acc", acc, sizeof(acc)),
            KILN_OK);
  EXPECT_EQ(acc[2], 34);

  // Another session starts from the bundle's values: the first one's updates
  // are private, and the file is unchanged.
  kiln_session_t *other = nullptr;
  ASSERT_EQ(kiln_session_create(bundle, "cpu", &other), KILN_OK);
  ASSERT_EQ(kiln_session_get_parameter(other, "acc", acc, sizeof(acc)),
            KILN_OK);
  EXPECT_EQ(acc[2], kWeightAcc[2]);
  kiln_session_release(other);

  const float restored[4] = {0, 0, 0, 100};
  ASSERT_EQ(
      kiln_session_set_parameter(session, "acc", restored, sizeof(restored)),
      KILN_OK);
  runAccumulate(session, x, y);
  EXPECT_EQ(y[0], 1);
  EXPECT_EQ(y[3], 102);
}

TEST_F(CpuSession, ParameterErrorsNameTheParameter) {
  float value[4] = {};
  expectStatus(kiln_session_get_parameter(session, "gamma", value, 16),
               KILN_STATUS_NOT_FOUND, "no parameter 'gamma'");
  expectStatus(kiln_session_set_parameter(session, "w", value, 12),
               KILN_STATUS_INVALID_ARGUMENT,
               "parameter 'w' (f32[2,2]) has 16 bytes, not 12");
  expectStatus(kiln_session_get_parameter(session, "w", nullptr, 16),
               KILN_STATUS_INVALID_ARGUMENT, "parameter 'w': data is NULL");
}

TEST_F(CpuSession, RunErrorsNameTheTensor) {
  float x[4] = {}, y[4] = {}, z[4] = {};
  double wide[4] = {};
  const int64_t shape5[] = {5};
  kiln_tensor_t good = f32Tensor("x", x, kShape4, 1);
  kiln_tensor_t out = f32Tensor("y", y, kShape4, 1);
  kiln_tensor_t extra = f32Tensor("z", z, kShape4, 1);
  kiln_tensor_t inputs2[2] = {good, extra};
  kiln_tensor_t twice[2] = {good, good};
  kiln_tensor_t mistyped = {"x",  KILN_ELEMENT_TYPE_F64, 1, kShape4,
                            wide, sizeof(wide)};
  kiln_tensor_t misshaped = f32Tensor("x", x, kShape2x2, 2);
  kiln_tensor_t longer = {"x", KILN_ELEMENT_TYPE_F32, 1, shape5, x, 20};
  kiln_tensor_t wrongSize = good;
  wrongSize.byte_size = 8;
  kiln_tensor_t noData = good;
  noData.data = nullptr;
  kiln_tensor_t noName = good;
  noName.name = nullptr;
  kiln_tensor_t misaligned = good;
  misaligned.data = reinterpret_cast<char *>(x) + 1;

  const char *entry = "add_one";
  expectStatus(kiln_session_run(session, entry, nullptr, 0, &out, 1),
               KILN_STATUS_INVALID_ARGUMENT,
               "entry point 'add_one': missing input 'x' (f32[4])");
  expectStatus(kiln_session_run(session, entry, &good, 1, nullptr, 0),
               KILN_STATUS_INVALID_ARGUMENT, "missing output 'y' (f32[4])");
  expectStatus(kiln_session_run(session, entry, inputs2, 2, &out, 1),
               KILN_STATUS_INVALID_ARGUMENT,
               "unexpected input 'z' (inputs: 'x')");
  expectStatus(kiln_session_run(session, entry, twice, 2, &out, 1),
               KILN_STATUS_INVALID_ARGUMENT, "input 'x' is given twice");
  expectStatus(kiln_session_run(session, entry, &mistyped, 1, &out, 1),
               KILN_STATUS_INVALID_ARGUMENT,
               "input 'x' has element type f64, expected f32[4]");
  expectStatus(kiln_session_run(session, entry, &misshaped, 1, &out, 1),
               KILN_STATUS_INVALID_ARGUMENT,
               "input 'x' has type f32[2,2], expected f32[4]");
  expectStatus(kiln_session_run(session, entry, &longer, 1, &out, 1),
               KILN_STATUS_INVALID_ARGUMENT,
               "input 'x' has type f32[5], expected f32[4]");
  expectStatus(kiln_session_run(session, entry, &wrongSize, 1, &out, 1),
               KILN_STATUS_INVALID_ARGUMENT,
               "input 'x' has byte_size 8, but f32[4] needs 16");
  expectStatus(kiln_session_run(session, entry, &noData, 1, &out, 1),
               KILN_STATUS_INVALID_ARGUMENT, "input 'x' has no data");
  expectStatus(kiln_session_run(session, entry, &noName, 1, &out, 1),
               KILN_STATUS_INVALID_ARGUMENT, "input 0 has no name");
  expectStatus(kiln_session_run(session, entry, &misaligned, 1, &out, 1),
               KILN_STATUS_INVALID_ARGUMENT,
               "input 'x': data is not aligned to its 4-byte elements");
  expectStatus(kiln_session_run(session, entry, &good, 1, &good, 1),
               KILN_STATUS_INVALID_ARGUMENT,
               "unexpected output 'x' (outputs: 'y')");
  expectStatus(kiln_session_run(session, "backward", &good, 1, &out, 1),
               KILN_STATUS_NOT_FOUND, "no entry point 'backward'");
  // Nothing ran: the output is untouched.
  EXPECT_EQ(y[0], 0);
}

TEST_F(CpuSession, SessionCreationErrors) {
  kiln_session_t *other = nullptr;
  expectStatus(kiln_session_create(bundle, "cuda", &other),
               KILN_STATUS_NOT_FOUND, "no target 'cuda' (targets: 'cpu')");

  kiln_bundle_t *notElf = nullptr;
  ASSERT_EQ(kiln_bundle_open(path("not-elf.kiln").c_str(), &notElf), KILN_OK);
  expectStatus(kiln_session_create(notElf, nullptr, &other),
               KILN_STATUS_FORMAT_ERROR,
               "the code of target 'cpu' (section 2) is not an ELF file");
  kiln_bundle_release(notElf);

  kiln_bundle_t *missing = nullptr;
  ASSERT_EQ(kiln_bundle_open(path("missing-kernel.kiln").c_str(), &missing),
            KILN_OK);
  expectStatus(kiln_session_create(missing, nullptr, &other),
               KILN_STATUS_NOT_FOUND,
               "does not export kernel 'softmax_kernel'");
  kiln_bundle_release(missing);
  EXPECT_EQ(other, nullptr);
}

TEST_F(CpuSession, OpenErrorsNameTheFile) {
  kiln_bundle_t *other = nullptr;
  std::string none = path("none.kiln");
  expectStatus(kiln_bundle_open(none.c_str(), &other), KILN_STATUS_IO_ERROR,
               none + ": cannot open");
  std::string bytes;
  ASSERT_TRUE(readFile(path("single.kiln"), bytes).ok());
  std::string truncated = path("truncated.kiln");
  {
    std::FILE *file = std::fopen(truncated.c_str(), "wb");
    ASSERT_NE(file, nullptr);
    std::fwrite(bytes.data(), 1, bytes.size() - 100, file);
    std::fclose(file);
  }
  expectStatus(kiln_bundle_open(truncated.c_str(), &other),
               KILN_STATUS_FORMAT_ERROR, "(truncated or extended)");
  EXPECT_EQ(other, nullptr);
  EXPECT_STREQ(kiln_status_name(KILN_STATUS_FORMAT_ERROR), "format error");
}

TEST_F(CpuSession, SessionOutlivesItsBundle) {
  kiln_bundle_t *single = nullptr;
  kiln_session_t *own = nullptr;
  ASSERT_EQ(kiln_bundle_open(path("single.kiln").c_str(), &single), KILN_OK);
  ASSERT_EQ(kiln_session_create(single, "cpu", &own), KILN_OK);
  kiln_bundle_release(single);
  float x[4] = {0, 1, 2, 3}, y[4] = {};
  kiln_tensor_t input = f32Tensor("x", x, kShape4, 1);
  kiln_tensor_t output = f32Tensor("y", y, kShape4, 1);
  EXPECT_EQ(kiln_session_run(own, "add_one", &input, 1, &output, 1), KILN_OK);
  EXPECT_EQ(y[3], 4);
  kiln_session_release(own);
}

TEST_F(CpuSession, ConcurrentRunsOnOneSessionAreSerialized) {
  constexpr int kRuns = 2000;
  auto work = [&]() {
    float x[4] = {1, 1, 1, 1}, y[4] = {};
    for (int i = 0; i < kRuns; ++i)
      runAccumulate(session, x, y);
  };
  std::thread first(work), second(work);
  first.join();
  second.join();
  float acc[4] = {};
  ASSERT_EQ(kiln_session_get_parameter(session, "acc", acc, sizeof(acc)),
            KILN_OK);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(acc[i], kWeightAcc[i] + 2 * kRuns) << i;
}

TEST_F(CpuSession, StagedInputsAreCopiedAndServeOneRunEach) {
  float x[4] = {1, 2, 3, 4}, y[4] = {};
  kiln_tensor_t input = f32Tensor("x", x, kShape4, 1);
  kiln_tensor_t output = f32Tensor("y", y, kShape4, 1);
  ASSERT_EQ(kiln_session_stage_inputs(session, "add_one", &input, 1), KILN_OK)
      << kiln_status_message();
  // The stage copied them: changing the caller's tensor does not reach it.
  x[0] = 100;
  ASSERT_EQ(kiln_session_run_staged(session, "add_one", &output, 1), KILN_OK)
      << kiln_status_message();
  EXPECT_EQ(y[0], 2);
  EXPECT_EQ(y[3], 5);
  expectStatus(kiln_session_run_staged(session, "add_one", &output, 1),
               KILN_STATUS_INVALID_ARGUMENT,
               "entry point 'add_one': no inputs are staged for this run");
}

TEST_F(CpuSession, StagedSetsWaitInOrderTwoAtATime) {
  float a[4] = {1, 1, 1, 1}, b[4] = {2, 2, 2, 2}, y[4] = {};
  kiln_tensor_t first = f32Tensor("x", a, kShape4, 1);
  kiln_tensor_t second = f32Tensor("x", b, kShape4, 1);
  kiln_tensor_t output = f32Tensor("y", y, kShape4, 1);
  ASSERT_EQ(kiln_session_stage_inputs(session, "add_one", &first, 1), KILN_OK);
  ASSERT_EQ(kiln_session_stage_inputs(session, "add_one", &second, 1), KILN_OK);
  expectStatus(kiln_session_stage_inputs(session, "add_one", &first, 1),
               KILN_STATUS_INVALID_ARGUMENT,
               "entry point 'add_one': 2 staged sets of inputs wait for runs "
               "already");
  // A wrong stage names the tensor and leaves the waiting sets alone.
  kiln_tensor_t wrong = f32Tensor("x", a, kShape3, 1);
  ASSERT_EQ(kiln_session_run_staged(session, "add_one", &output, 1), KILN_OK);
  EXPECT_EQ(y[0], 2);
  expectStatus(kiln_session_stage_inputs(session, "add_one", &wrong, 1),
               KILN_STATUS_INVALID_ARGUMENT,
               "entry point 'add_one': input 'x' has type f32[3], expected "
               "f32[4]");
  ASSERT_EQ(kiln_session_run_staged(session, "add_one", &output, 1), KILN_OK);
  EXPECT_EQ(y[0], 3);
  // Each entry point has its own sets; a plain run takes none of them.
  ASSERT_EQ(kiln_session_stage_inputs(session, "add_one", &first, 1), KILN_OK);
  ASSERT_EQ(kiln_session_run(session, "add_one", &second, 1, &output, 1),
            KILN_OK);
  EXPECT_EQ(y[0], 3);
  float z[4] = {};
  kiln_tensor_t affineOutput = f32Tensor("y", z, kShape2x2, 2);
  expectStatus(kiln_session_run_staged(session, "affine", &affineOutput, 1),
               KILN_STATUS_INVALID_ARGUMENT,
               "entry point 'affine': no inputs are staged");
  ASSERT_EQ(kiln_session_run_staged(session, "add_one", &output, 1), KILN_OK);
  EXPECT_EQ(y[0], 2);
  expectStatus(kiln_session_stage_inputs(session, "nope", &first, 1),
               KILN_STATUS_NOT_FOUND, "no entry point 'nope'");
  expectStatus(kiln_session_stage_inputs(nullptr, "add_one", &first, 1),
               KILN_STATUS_INVALID_ARGUMENT, "session");
}

/// The use the API is for: a loader thread stages batch k + 1 while the
/// step runs batch k. Here it stages batch k once run k - 2 has ended, so
/// up to two sets wait, and the runs at times find none yet.
TEST_F(CpuSession, ALoaderThreadStagesWhileTheStepRuns) {
  constexpr int kBatches = 2000;
  std::mutex mutex;
  std::condition_variable changed;
  int started = 0; // runs begun by the main thread
  std::thread loader([&]() {
    float x[4];
    for (int k = 0; k < kBatches; ++k) {
      {
        std::unique_lock<std::mutex> lock(mutex);
        changed.wait(lock, [&] { return started >= k - 1; });
      }
      for (float &value : x)
        value = static_cast<float>(k);
      kiln_tensor_t input = f32Tensor("x", x, kShape4, 1);
      ASSERT_EQ(kiln_session_stage_inputs(session, "add_one", &input, 1),
                KILN_OK)
          << kiln_status_message();
    }
  });
  float y[4] = {};
  kiln_tensor_t output = f32Tensor("y", y, kShape4, 1);
  int wrong = 0;
  for (int k = 0; k < kBatches; ++k) {
    kiln_status_t status;
    // The loader may not have staged batch k yet.
    while ((status = kiln_session_run_staged(session, "add_one", &output, 1)) !=
           KILN_OK) {
      ASSERT_EQ(status, KILN_STATUS_INVALID_ARGUMENT) << kiln_status_message();
      std::this_thread::yield();
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      started = k + 1;
    }
    changed.notify_one();
    wrong +=
        y[0] != static_cast<float>(k + 1) || y[3] != static_cast<float>(k + 1);
  }
  loader.join();
  EXPECT_EQ(wrong, 0);
}

TEST_F(CpuSession, ErrorMessagesAreThreadLocal) {
  kiln_tensor_info_t tensor;
  ASSERT_NE(kiln_bundle_get_entry_point_input(bundle, 7, 0, &tensor), KILN_OK);
  std::string mine = kiln_status_message();
  std::thread other([&]() {
    EXPECT_STREQ(kiln_status_message(), "");
    kiln_target_info_t target;
    EXPECT_NE(kiln_bundle_get_target(bundle, 5, &target), KILN_OK);
  });
  other.join();
  EXPECT_EQ(mine, kiln_status_message());
}

/// A step compiled for data parallelism calls libkilnrt's collectives; in a
/// process no launcher started they change nothing, before and after
/// kiln_distributed_init, which makes a single rank without MPI.
TEST_F(CpuSession, DataParallelStepOnOneRank) {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK"))
    GTEST_SKIP() << "started by an MPI launcher";
  kiln_bundle_t *dp = nullptr;
  kiln_session_t *dpSession = nullptr;
  ASSERT_EQ(kiln_bundle_open(path("train-dp2.kiln").c_str(), &dp), KILN_OK)
      << kiln_status_message();
  ASSERT_EQ(kiln_session_create(dp, "cpu", &dpSession), KILN_OK)
      << kiln_status_message();
  kiln_bundle_release(dp);
  const int64_t shape2[] = {2};
  float x[2] = {1, 3}, loss = 0, lr = 0, gradNorm = 0;
  kiln_tensor_t input = f32Tensor("x", x, shape2, 1);
  kiln_tensor_t outputs[] = {f32Tensor("loss", &loss, nullptr, 0),
                             f32Tensor("lr", &lr, nullptr, 0),
                             f32Tensor("grad_norm", &gradNorm, nullptr, 0)};
  auto step = [&] {
    ASSERT_EQ(kiln_session_run(dpSession, "train_step", &input, 1, outputs, 3),
              KILN_OK)
        << kiln_status_message();
  };
  step();
  EXPECT_EQ(loss, 2);     // mean(1, 3)
  EXPECT_EQ(gradNorm, 5); // mean(1, 9)

  kiln_distributed_info_t info;
  ASSERT_EQ(kiln_distributed_init(nullptr, &info), KILN_OK)
      << kiln_status_message();
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.world_size, 1);
  EXPECT_EQ(info.local_rank, 0);
  EXPECT_EQ(info.local_size, 1);
  EXPECT_STREQ(info.backend, "none");
  expectStatus(kiln_distributed_init(nullptr, &info),
               KILN_STATUS_INVALID_ARGUMENT, "already initialised");
  step();
  EXPECT_EQ(loss, 2);
  float w[2] = {};
  ASSERT_EQ(kiln_session_get_parameter(dpSession, "w", w, sizeof(w)), KILN_OK);
  EXPECT_EQ(w[0], 4);
  EXPECT_EQ(w[1], 10);
  EXPECT_EQ(kiln_collective_all_reduce_mean_f32_begin(x, 2), 0);
  kiln_collective_wait(0);
  EXPECT_EQ(x[1], 3);

  double values[2] = {1.5, -2};
  EXPECT_EQ(kiln_distributed_barrier(), KILN_OK);
  EXPECT_EQ(kiln_distributed_all_reduce_f64(values, 2, KILN_REDUCE_SUM),
            KILN_OK);
  EXPECT_EQ(values[0], 1.5);
  EXPECT_EQ(values[1], -2);
  expectStatus(kiln_distributed_all_reduce_f64(
                   values, 2, static_cast<kiln_reduce_op_t>(7)),
               KILN_STATUS_INVALID_ARGUMENT, "unknown reduction 7");
  // A world of one: its shard is the whole value, a gather a copy.
  float whole[3] = {1, 2, 3}, shard[3] = {}, gathered[3] = {};
  EXPECT_EQ(kiln_collective_reduce_scatter_mean_f32_begin(whole, shard, 3, 1),
            0);
  kiln_collective_local_shard_f32(whole, gathered, 3, 1);
  EXPECT_EQ(shard[2], 3);
  EXPECT_EQ(gathered[1], 2);
  EXPECT_EQ(kiln_collective_all_gather_f32_begin(shard, gathered, 3, 1), 0);
  EXPECT_EQ(gathered[0], 1);
  char bytes[4] = {'k', 'i', 'l', 'n'}, copy[4] = {};
  EXPECT_EQ(kiln_distributed_all_gather(bytes, copy, sizeof(bytes)), KILN_OK);
  EXPECT_EQ(std::string(copy, 4), "kiln");
  expectStatus(kiln_distributed_all_gather(nullptr, copy, 4),
               KILN_STATUS_INVALID_ARGUMENT, "input");
  kiln_distributed_abort(1); // a single rank: returns
  EXPECT_EQ(kiln_distributed_finalize(), KILN_OK);
  EXPECT_EQ(kiln_distributed_finalize(), KILN_OK);
  kiln_session_release(dpSession);
}

} // namespace
