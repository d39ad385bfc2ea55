//===- NpyTest.cpp - .npy arrays and .npz archives ------------------------===//

#include "kiln/runtime/Npy.h"

#include <gtest/gtest.h>
#include <zip.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <unistd.h>

using namespace kiln::runtime;

namespace {

class NpyTest : public ::testing::Test {
protected:
  void SetUp() override {
    const char *base = std::getenv("TMPDIR");
    dir = std::string(base && *base ? base : "/tmp") + "/kiln-npy-XXXXXX";
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
  }
  void TearDown() override {
    std::string command = "rm -rf '" + dir + "'";
    EXPECT_EQ(std::system(command.c_str()), 0);
  }

  void writeBytes(const std::string &name, const std::string &bytes) {
    std::ofstream file(dir + "/" + name, std::ios::binary | std::ios::trunc);
    file << bytes;
  }

  std::string dir;
};

/// An array of `type` and `shape` whose bytes count up from `seed`.
NamedArray makeArray(const std::string &name, kiln_element_type_t type,
                     std::vector<int64_t> shape, uint8_t seed) {
  NamedArray named;
  named.name = name;
  named.array.elementType = type;
  named.array.shape = std::move(shape);
  EXPECT_TRUE(allocateNpyArray(named.array).ok());
  for (size_t i = 0; i < named.array.data.size(); ++i)
    named.array.data.data()[i] = static_cast<uint8_t>(seed + i);
  if (type == KILN_ELEMENT_TYPE_BOOL)
    for (size_t i = 0; i < named.array.data.size(); ++i)
      named.array.data.data()[i] &= 1;
  return named;
}

void expectSameArray(const NamedArray &a, const NamedArray &b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.array.elementType, b.array.elementType);
  EXPECT_EQ(a.array.shape, b.array.shape);
  ASSERT_EQ(a.array.data.size(), b.array.data.size());
  if (a.array.data.size() > 0)
    EXPECT_EQ(std::memcmp(a.array.data.data(), b.array.data.data(),
                          a.array.data.size()),
              0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.array.data.data()) % 64, 0u);
}

/// The .npy file numpy writes for np.arange(6, dtype='<f4').reshape(2, 3).
std::string numpyStyleNpy(const std::string &dict, int major = 1) {
  std::string header = dict;
  size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64 != 0)
    header += ' ';
  header += '\n';
  std::string bytes = "\x93NUMPY";
  bytes += static_cast<char>(major);
  bytes += '\0';
  for (size_t i = 0; i < prefix - 8; ++i)
    bytes += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  bytes += header;
  for (int i = 0; i < 6; ++i) {
    float value = static_cast<float>(i);
    bytes.append(reinterpret_cast<const char *>(&value), 4);
  }
  return bytes;
}

const char *const kNumpyDict =
    "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";

TEST_F(NpyTest, HeadersMatchNumpy) {
  std::string header;
  ASSERT_TRUE(encodeNpyHeader(KILN_ELEMENT_TYPE_F32, {2, 3}, header).ok());
  EXPECT_EQ(header, numpyStyleNpy(kNumpyDict).substr(0, header.size()));
  ASSERT_TRUE(encodeNpyHeader(KILN_ELEMENT_TYPE_I64, {5}, header).ok());
  EXPECT_NE(header.find("{'descr': '<i8', 'fortran_order': False, 'shape': "
                        "(5,), }"),
            std::string::npos);
  ASSERT_TRUE(encodeNpyHeader(KILN_ELEMENT_TYPE_BOOL, {}, header).ok());
  EXPECT_NE(header.find("'descr': '|b1'"), std::string::npos);
  EXPECT_NE(header.find("'shape': (), }"), std::string::npos);
  // bf16 as ml_dtypes' bfloat16 saves it.
  ASSERT_TRUE(encodeNpyHeader(KILN_ELEMENT_TYPE_BF16, {2}, header).ok());
  EXPECT_NE(header.find("'descr': '<V2'"), std::string::npos);
}

TEST_F(NpyTest, ReadsBf16AsTheTwoByteVoidType) {
  // np.save of an ml_dtypes.bfloat16 array writes '<V2'; np.load of it
  // reports '|V2'.
  for (const char *descr : {"<V2", "|V2"}) {
    SCOPED_TRACE(descr);
    std::string bytes = numpyStyleNpy(std::string("{'descr': '") + descr +
                                      "', 'fortran_order': False, "
                                      "'shape': (2,), }");
    bytes.resize(bytes.size() - 24); // The header alone.
    // 1.0 and -2.5 in bf16.
    bytes += std::string("\x80\x3f\x20\xc0", 4);
    writeBytes("b.npy", bytes);
    NpyArray array;
    Status status = readNpyFile(dir + "/b.npy", array);
    ASSERT_TRUE(status.ok()) << status.message();
    EXPECT_EQ(array.elementType, KILN_ELEMENT_TYPE_BF16);
    EXPECT_EQ(array.shape, (std::vector<int64_t>{2}));
  }
  // Other void types are not bf16.
  writeBytes("v4.npy", numpyStyleNpy("{'descr': '<V4', 'fortran_order': "
                                     "False, 'shape': (2, 3), }"));
  NpyArray array;
  EXPECT_FALSE(readNpyFile(dir + "/v4.npy", array).ok());
}

TEST_F(NpyTest, LongHeadersUseVersion2) {
  std::vector<int64_t> shape(22000, 1);
  std::string header;
  ASSERT_TRUE(encodeNpyHeader(KILN_ELEMENT_TYPE_F32, shape, header).ok());
  EXPECT_EQ(header[6], 2);
  EXPECT_EQ(header.size() % 64, 0u);
  NamedArray named = makeArray("x", KILN_ELEMENT_TYPE_F32, shape, 3);
  ASSERT_TRUE(writeNpyFile(dir + "/long.npy", named.array).ok());
  NamedArray back;
  back.name = "x";
  Status status = readNpyFile(dir + "/long.npy", back.array);
  ASSERT_TRUE(status.ok()) << status.message();
  expectSameArray(named, back);
}

TEST_F(NpyTest, ReadsNumpyFilesOfEachVersion) {
  for (int major : {1, 2, 3}) {
    writeBytes("a.npy", numpyStyleNpy(kNumpyDict, major));
    NpyArray array;
    Status status = readNpyFile(dir + "/a.npy", array);
    ASSERT_TRUE(status.ok()) << status.message();
    EXPECT_EQ(array.elementType, KILN_ELEMENT_TYPE_F32);
    EXPECT_EQ(array.shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(reinterpret_cast<const float *>(array.data.data())[5], 5.0f);
  }
}

TEST_F(NpyTest, AcceptsOtherSpellingsOfTheDict) {
  writeBytes("a.npy",
             numpyStyleNpy("{\"shape\": (2,3), \"fortran_order\": False, "
                           "\"descr\": \"<f4\"}"));
  NpyArray array;
  Status status = readNpyFile(dir + "/a.npy", array);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(array.shape, (std::vector<int64_t>{2, 3}));
}

// ml_dtypes' one-byte types (float8, float4, int4, int2) save as |V1 (and
// float8_e5m2 as <f1) without naming the type: such an array takes the narrow
// type of what it is bound to, and only a narrow one; narrow outputs are
// written as |V1.
TEST_F(NpyTest, NarrowTypesTravelAsOneByteVoids) {
  for (const char *descr : {"|V1", "<f1"}) {
    SCOPED_TRACE(descr);
    std::string dict = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': (3,), }";
    std::string bytes = numpyStyleNpy(dict);
    bytes.resize(bytes.size() - 24); // The header alone.
    bytes += std::string("\x0f\x08\x07", 3);
    writeBytes("narrow.npy", bytes);
    NpyArray array;
    ASSERT_TRUE(readNpyFile(dir + "/narrow.npy", array).ok());
    EXPECT_TRUE(array.narrowBytes);
    adoptNarrowType(array, KILN_ELEMENT_TYPE_F32);
    EXPECT_EQ(array.elementType, KILN_ELEMENT_TYPE_U8);
    adoptNarrowType(array, KILN_ELEMENT_TYPE_I4);
    EXPECT_EQ(array.elementType, KILN_ELEMENT_TYPE_I4);
    EXPECT_EQ(array.data.size(), 3u);
  }
  NpyArray plain;
  plain.elementType = KILN_ELEMENT_TYPE_U8;
  adoptNarrowType(plain, KILN_ELEMENT_TYPE_I4);
  EXPECT_EQ(plain.elementType, KILN_ELEMENT_TYPE_U8);
  EXPECT_STREQ(npyDescr(KILN_ELEMENT_TYPE_F8E4M3FN), "|V1");
  EXPECT_STREQ(npyDescr(KILN_ELEMENT_TYPE_U2), "|V1");
}

TEST_F(NpyTest, RefusesWhatItCannotRepresent) {
  struct Case {
    std::string dict;
    std::string fragment;
  };
  const Case cases[] = {
      {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
       "Fortran-order arrays are not supported"},
      {"{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }",
       "big-endian dtype '>f4' is not supported"},
      {"{'descr': '<c8', 'fortran_order': False, 'shape': (2, 3), }",
       "dtype '<c8' is not supported (supported: f4 f8 f2 i8 i4 i2 i1 u8 u4 "
       "u2 u1 b1, V2 for bf16 and V1 for the float8, float4, int4 and int2 "
       "types)"},
      {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2, 3), }",
       "structured dtypes are not supported"},
      {"{'descr': '<f4', 'shape': (2, 3), }",
       "lacks 'descr', 'fortran_order' or 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}",
       "unexpected or repeated key 'x'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }",
       "expected a dimension"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 3), }",
       "holds 24 bytes of data, but <f4 (3, 3) needs 36"},
      {"['descr']", "malformed .npy header at character 0: expected '{'"},
  };
  for (const Case &test : cases) {
    SCOPED_TRACE(test.dict);
    writeBytes("bad.npy", numpyStyleNpy(test.dict));
    NpyArray array;
    Status status = readNpyFile(dir + "/bad.npy", array);
    ASSERT_FALSE(status.ok());
    EXPECT_NE(status.message().find(test.fragment), std::string::npos)
        << status.message();
    EXPECT_EQ(status.message().rfind(dir + "/bad.npy: ", 0), 0u);
  }
}

TEST_F(NpyTest, RefusesDamagedFiles) {
  std::string good = numpyStyleNpy(kNumpyDict);
  NpyArray array;
  writeBytes("short.npy", good.substr(0, good.size() - 1));
  EXPECT_NE(readNpyFile(dir + "/short.npy", array)
                .message()
                .find("holds 23 bytes of data"),
            std::string::npos);
  writeBytes("long.npy", good + "x");
  EXPECT_FALSE(readNpyFile(dir + "/long.npy", array).ok());
  writeBytes("magic.npy", "PK" + good);
  EXPECT_NE(readNpyFile(dir + "/magic.npy", array).message().find("bad magic"),
            std::string::npos);
  for (size_t length = 0; length < 64; ++length) {
    writeBytes("cut.npy", good.substr(0, length));
    EXPECT_FALSE(readNpyFile(dir + "/cut.npy", array).ok()) << length;
  }
  Status missing = readNpyFile(dir + "/none.npy", array);
  EXPECT_EQ(static_cast<int>(missing.code()),
            static_cast<int>(StatusCode::IoError));
}

TEST_F(NpyTest, NpzRoundTripsEveryDtypePlainAndCompressed) {
  std::vector<NamedArray> arrays;
  arrays.push_back(makeArray("f32", KILN_ELEMENT_TYPE_F32, {2, 3}, 1));
  arrays.push_back(makeArray("f64", KILN_ELEMENT_TYPE_F64, {4}, 2));
  arrays.push_back(makeArray("f16", KILN_ELEMENT_TYPE_F16, {3, 1, 2}, 3));
  arrays.push_back(makeArray("i64", KILN_ELEMENT_TYPE_I64, {}, 4));
  arrays.push_back(makeArray("i32", KILN_ELEMENT_TYPE_I32, {0, 5}, 5));
  arrays.push_back(makeArray("i8", KILN_ELEMENT_TYPE_I8, {7}, 6));
  arrays.push_back(makeArray("i16", KILN_ELEMENT_TYPE_I16, {3}, 9));
  arrays.push_back(makeArray("u8", KILN_ELEMENT_TYPE_U8, {5}, 10));
  arrays.push_back(makeArray("u16", KILN_ELEMENT_TYPE_U16, {2}, 11));
  arrays.push_back(makeArray("u32", KILN_ELEMENT_TYPE_U32, {2, 2}, 12));
  arrays.push_back(makeArray("u64", KILN_ELEMENT_TYPE_U64, {3}, 13));
  arrays.push_back(makeArray("input:0/b", KILN_ELEMENT_TYPE_BOOL, {2, 2}, 7));
  arrays.push_back(makeArray("big", KILN_ELEMENT_TYPE_F32, {256, 300}, 8));
  for (bool compress : {false, true}) {
    SCOPED_TRACE(compress ? "compressed" : "stored");
    std::string path = dir + (compress ? "/c.npz" : "/p.npz");
    Status status = writeNpz(path, arrays, compress);
    ASSERT_TRUE(status.ok()) << status.message();
    std::vector<NamedArray> back;
    status = readNpz(path, back);
    ASSERT_TRUE(status.ok()) << status.message();
    ASSERT_EQ(back.size(), arrays.size());
    for (size_t i = 0; i < arrays.size(); ++i)
      expectSameArray(arrays[i], back[i]);
  }
  std::ifstream plain(dir + "/p.npz", std::ios::binary | std::ios::ate);
  std::ifstream compressed(dir + "/c.npz", std::ios::binary | std::ios::ate);
  EXPECT_LT(compressed.tellg(), plain.tellg());
}

TEST_F(NpyTest, EmptyNpz) {
  ASSERT_TRUE(writeNpz(dir + "/e.npz", {}, false).ok());
  std::vector<NamedArray> back;
  Status status = readNpz(dir + "/e.npz", back);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_TRUE(back.empty());
}

TEST_F(NpyTest, NpzErrorsNameTheFileAndArray) {
  std::vector<NamedArray> arrays;
  arrays.push_back(makeArray("x", KILN_ELEMENT_TYPE_F32, {2, 3}, 1));
  ASSERT_TRUE(writeNpz(dir + "/a.npz", arrays, true).ok());
  std::string bytes;
  {
    std::ifstream file(dir + "/a.npz", std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(file), {});
  }
  // Damage the deflated data of the entry: a read or checksum error.
  std::string damaged = bytes;
  damaged[60] = static_cast<char>(damaged[60] ^ 0x55);
  writeBytes("damaged.npz", damaged);
  std::vector<NamedArray> back;
  Status status = readNpz(dir + "/damaged.npz", back);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.message().rfind(dir + "/damaged.npz: ", 0), 0u)
      << status.message();

  writeBytes("cut.npz", bytes.substr(0, bytes.size() / 2));
  status = readNpz(dir + "/cut.npz", back);
  EXPECT_EQ(static_cast<int>(status.code()),
            static_cast<int>(StatusCode::FormatError))
      << status.message();

  writeBytes("text.npz", "not a zip archive at all");
  status = readNpz(dir + "/text.npz", back);
  EXPECT_NE(status.message().find("not a valid .npz archive"),
            std::string::npos)
      << status.message();

  status = readNpz(dir + "/none.npz", back);
  EXPECT_EQ(static_cast<int>(status.code()),
            static_cast<int>(StatusCode::IoError))
      << status.message();

  arrays.push_back(makeArray("x", KILN_ELEMENT_TYPE_I8, {1}, 1));
  status = writeNpz(dir + "/twice.npz", arrays, false);
  EXPECT_NE(status.message().find("array 'x'"), std::string::npos)
      << status.message();
}

TEST_F(NpyTest, NpzEntriesMustBeNpyArrays) {
  static const char kNotes[] = "hello";
  std::string path = dir + "/odd.npz";
  zip_t *archive = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, nullptr);
  ASSERT_NE(archive, nullptr);
  zip_source_t *source = zip_source_buffer(archive, kNotes, 5, 0);
  ASSERT_GE(zip_file_add(archive, "notes.txt", source, 0), 0);
  ASSERT_EQ(zip_close(archive), 0);
  std::vector<NamedArray> back;
  Status status = readNpz(path, back);
  EXPECT_NE(status.message().find("entry 'notes.txt' is not an .npy array"),
            std::string::npos)
      << status.message();
}

} // namespace
