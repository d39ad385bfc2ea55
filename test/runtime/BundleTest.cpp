//===- BundleTest.cpp - the bundle writer and reader ----------------------===//
//
// Round trips through the writer and the reader, and one test per validation
// rule: each builds a bundle that breaks exactly that rule, with every
// checksum correct, and expects an error naming what is wrong.
//
//===----------------------------------------------------------------------===//

#include "TestBundles.h"
#include "kiln/runtime/BundleReader.h"
#include "kiln/runtime/BundleWriter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <unistd.h>

using namespace kiln::runtime;
using namespace kiln::runtime::testing;
namespace bp = kiln::bundle;

namespace {

std::string multiBundleBytes() {
  BundleWriter writer;
  buildMultiBundle(writer, standInCode());
  std::string bytes;
  Status status = writer.serialize(bytes);
  EXPECT_TRUE(status.ok()) << status.message();
  return bytes;
}

Status readBytes(const std::string &bytes, const ReadOptions &options = {}) {
  std::unique_ptr<BundleReader> reader;
  return BundleReader::fromBuffer(ByteSpan(bytes), "test.kiln", reader,
                                  options);
}

/// The pieces of the valid multi bundle, to reassemble with changes.
struct Parts {
  bp::Manifest manifest;
  std::string weights;
  std::string code;
};

Parts multiBundleParts() {
  std::string bytes = multiBundleBytes();
  std::unique_ptr<BundleReader> reader;
  Status status =
      BundleReader::fromBuffer(ByteSpan(bytes), "test.kiln", reader);
  EXPECT_TRUE(status.ok()) << status.message();
  Parts parts;
  parts.manifest = reader->manifest();
  ByteSpan weights = reader->sectionBytes(reader->manifest().weights_section());
  parts.weights.assign(reinterpret_cast<const char *>(weights.data),
                       weights.size);
  ByteSpan code =
      reader->sectionBytes(reader->manifest().targets(0).code_section());
  parts.code.assign(reinterpret_cast<const char *>(code.data), code.size);
  return parts;
}

/// Lays out the parts as the writer does: manifest, weights, code.
std::string encodeParts(const Parts &parts) {
  std::string manifest = parts.manifest.SerializeAsString();
  return encodeBundle(
      {{SectionKind::Manifest, "manifest", ByteSpan(manifest)},
       {SectionKind::Weights, "weights", ByteSpan(parts.weights)},
       {SectionKind::CpuCode, "code.cpu", ByteSpan(parts.code)}});
}

/// Recomputes the table and header checksums after the header or the table
/// was edited.
void refreshChecksums(std::string &bytes) {
  auto *data = reinterpret_cast<uint8_t *>(bytes.data());
  uint32_t count = loadLE32(data + header_field::kSectionCount);
  uint64_t table = loadLE64(data + header_field::kTableOffset);
  if (table + uint64_t(count) * kSectionEntrySize <= bytes.size())
    storeLE32(data + header_field::kTableCrc,
              crc32(ByteSpan(data + table, count * kSectionEntrySize)));
  storeLE32(data + header_field::kHeaderCrc,
            crc32(ByteSpan(data, header_field::kHeaderCrc)));
}

uint8_t *entryField(std::string &bytes, uint32_t section, size_t field) {
  return reinterpret_cast<uint8_t *>(bytes.data()) + kBundleHeaderSize +
         section * kSectionEntrySize + field;
}

void expectError(const Status &status, StatusCode code,
                 const std::string &fragment) {
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(static_cast<int>(status.code()), static_cast<int>(code))
      << status.message();
  EXPECT_NE(status.message().find(fragment), std::string::npos)
      << "message: " << status.message()
      << "\nexpected to contain: " << fragment;
}

TEST(BundleWriter, RoundTripsManifestAndSections) {
  BundleWriter writer;
  buildMultiBundle(writer, standInCode());
  std::string bytes;
  ASSERT_TRUE(writer.serialize(bytes).ok());

  std::unique_ptr<BundleReader> reader;
  Status status = BundleReader::fromBuffer(ByteSpan(bytes), "m.kiln", reader);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(reader->manifest().SerializeAsString(),
            writer.manifest().SerializeAsString());
  ASSERT_EQ(reader->sections().size(), 3u);
  EXPECT_EQ(reader->sections()[0].name, "manifest");
  EXPECT_EQ(reader->sections()[1].name, "weights");
  EXPECT_EQ(reader->sections()[2].name, "code.cpu");
  for (const SectionEntry &section : reader->sections())
    EXPECT_EQ(section.offset % 64, 0u) << section.name;

  ByteSpan code = reader->sectionBytes(2);
  EXPECT_EQ(std::string(reinterpret_cast<const char *>(code.data), code.size),
            standInCode());
  const bp::Parameter &b = reader->manifest().parameters(1);
  EXPECT_EQ(b.weights_offset() % 64, 0u);
  ByteSpan weights = reader->sectionBytes(1);
  EXPECT_EQ(std::memcmp(weights.data + b.weights_offset(), kWeightB,
                        sizeof(kWeightB)),
            0);
  EXPECT_EQ(reader->findEntryPoint("mixed"), 2);
  EXPECT_EQ(reader->findParameter("acc"), 2);
  EXPECT_EQ(reader->findTarget("cpu"), 0);
  EXPECT_EQ(reader->findTarget("cuda"), -1);
}

class TempDir : public ::testing::Test {
protected:
  void SetUp() override {
    const char *base = std::getenv("TMPDIR");
    dir = std::string(base && *base ? base : "/tmp") + "/kiln-bundle-XXXXXX";
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
  }
  void TearDown() override {
    std::string command = "rm -rf '" + dir + "'";
    EXPECT_EQ(std::system(command.c_str()), 0);
  }
  std::string dir;
};

using BundleFile = TempDir;

TEST_F(BundleFile, WriteThenOpenMapsTheFile) {
  BundleWriter writer;
  buildMultiBundle(writer, standInCode());
  std::string path = dir + "/m.kiln";
  Status status = writer.write(path);
  ASSERT_TRUE(status.ok()) << status.message();

  std::unique_ptr<BundleReader> reader;
  status = BundleReader::open(path, reader);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_GE(reader->fileDescriptor(), 0);
  EXPECT_EQ(reader->name(), path);
  EXPECT_EQ(reader->manifest().entry_points_size(), 4);

  std::string fileBytes, serialized;
  ASSERT_TRUE(readFile(path, fileBytes).ok());
  ASSERT_TRUE(writer.serialize(serialized).ok());
  EXPECT_EQ(fileBytes, serialized);
}

/// The resident KiB of the mapping that holds `address`, from
/// /proc/self/smaps; -1 when no mapping holds it.
long residentKiB(const void *address) {
  std::FILE *smaps = std::fopen("/proc/self/smaps", "r");
  if (!smaps)
    return -1;
  auto target = reinterpret_cast<uintptr_t>(address);
  bool inside = false;
  long resident = -1;
  char line[512];
  while (std::fgets(line, sizeof(line), smaps)) {
    unsigned long begin, end;
    if (std::sscanf(line, "%lx-%lx ", &begin, &end) == 2 &&
        std::strchr(line, ':') > std::strchr(line, ' ')) {
      inside = begin <= target && target < end;
      continue;
    }
    long kib;
    if (inside && std::sscanf(line, "Rss: %ld kB", &kib) == 1) {
      resident = kib;
      break;
    }
  }
  std::fclose(smaps);
  return resident;
}

TEST_F(BundleFile, OpeningLeavesNoPagesOfTheFileResident) {
  // Checking the checksums reads all 8 MiB of code; none of it may stay in
  // the resident set afterwards.
  BundleWriter writer;
  buildSingleBundle(writer, std::string(8 << 20, '\x5a'));
  std::string path = dir + "/big.kiln";
  ASSERT_TRUE(writer.write(path).ok());
  std::unique_ptr<BundleReader> reader;
  Status status = BundleReader::open(path, reader);
  ASSERT_TRUE(status.ok()) << status.message();
  const uint8_t *code = nullptr;
  for (uint32_t i = 0; i < reader->sections().size(); ++i)
    if (reader->sectionBytes(i).size == 8u << 20)
      code = reader->sectionBytes(i).data;
  ASSERT_NE(code, nullptr);
  long resident = residentKiB(code);
  ASSERT_GE(resident, 0) << "no mapping holds the bundle's bytes";
  EXPECT_LT(resident, 1024) << "KiB of the bundle still resident";
  // The bytes are still there when read again.
  EXPECT_EQ(code[12345], 0x5a);
}

TEST_F(BundleFile, WriteReplacesAtomicallyAndLeavesNoTemporary) {
  std::string path = dir + "/m.kiln";
  BundleWriter single, multi;
  buildSingleBundle(single, standInCode());
  buildMultiBundle(multi, standInCode());
  ASSERT_TRUE(single.write(path).ok());
  ASSERT_TRUE(multi.write(path).ok());
  std::unique_ptr<BundleReader> reader;
  ASSERT_TRUE(BundleReader::open(path, reader).ok());
  EXPECT_EQ(reader->manifest().model_name(), "multi");
  std::string listing = "test $(ls -A '" + dir + "' | wc -l) -eq 1";
  EXPECT_EQ(std::system(listing.c_str()), 0);
}

TEST_F(BundleFile, InvalidManifestIsNotWritten) {
  BundleWriter writer;
  buildMultiBundle(writer, standInCode());
  writer.manifest()
      .mutable_entry_points(0)
      ->mutable_commands(0)
      ->mutable_kernel()
      ->set_symbol("no_such_kernel");
  std::string path = dir + "/m.kiln";
  expectError(writer.write(path), StatusCode::FormatError,
              "calls kernel 'no_such_kernel', which target 'cpu' does not "
              "list");
  EXPECT_NE(access(path.c_str(), F_OK), 0);
  std::string listing = "test -z \"$(ls -A '" + dir + "')\"";
  EXPECT_EQ(std::system(listing.c_str()), 0);
}

TEST_F(BundleFile, UnwritableDirectoryIsAnIoError) {
  BundleWriter writer;
  buildSingleBundle(writer, standInCode());
  std::string path = dir + "/missing/m.kiln";
  expectError(writer.write(path), StatusCode::IoError, path);
}

TEST_F(BundleFile, OpenErrorsNameTheFile) {
  std::unique_ptr<BundleReader> reader;
  expectError(BundleReader::open(dir + "/none.kiln", reader),
              StatusCode::IoError, dir + "/none.kiln: cannot open");
  expectError(BundleReader::open(dir, reader), StatusCode::IoError,
              "not a regular file");
  std::string empty = dir + "/empty.kiln";
  std::string touch = "touch '" + empty + "'";
  ASSERT_EQ(std::system(touch.c_str()), 0);
  expectError(BundleReader::open(empty, reader), StatusCode::FormatError,
              "the file is empty");
}

/// A change to the bytes of a valid bundle, the error it must cause and the
/// words the message must contain.
struct ByteCase {
  const char *name;
  std::function<void(std::string &)> change;
  StatusCode code;
  std::string fragment;
};

TEST(BundleReader, RejectsEachBrokenHeaderAndTableRule) {
  using namespace header_field;
  const std::vector<ByteCase> cases = {
      {"short file", [](std::string &b) { b.resize(40); },
       StatusCode::FormatError, "shorter than the 64-byte bundle header"},
      {"bad magic", [](std::string &b) { b[3] = 'X'; }, StatusCode::FormatError,
       "not a Kiln bundle (bad magic"},
      {"newer version",
       [](std::string &b) {
         storeLE32(reinterpret_cast<uint8_t *>(&b[kVersion]), 4);
         refreshChecksums(b);
       },
       StatusCode::Unsupported,
       "bundle format version 4; this runtime reads "
       "version 3"},
      {"older version",
       [](std::string &b) {
         storeLE32(reinterpret_cast<uint8_t *>(&b[kVersion]), 2);
         refreshChecksums(b);
       },
       StatusCode::Unsupported,
       "bundle format version 2; this runtime reads "
       "version 3"},
      {"header checksum", [](std::string &b) { b[kTableOffset + 7] ^= 1; },
       StatusCode::FormatError, "header checksum mismatch"},
      {"reserved header bytes",
       [](std::string &b) {
         b[kReserved + 3] = 1;
         refreshChecksums(b);
       },
       StatusCode::FormatError, "reserved header bytes"},
      {"extended file", [](std::string &b) { b.append(64, '\0'); },
       StatusCode::FormatError, "truncated or extended"},
      {"no sections",
       [](std::string &b) {
         storeLE32(reinterpret_cast<uint8_t *>(&b[kSectionCount]), 0);
         refreshChecksums(b);
       },
       StatusCode::FormatError, "section count 0"},
      {"table outside the file",
       [](std::string &b) {
         storeLE64(reinterpret_cast<uint8_t *>(&b[kTableOffset]),
                   b.size() - 64);
         refreshChecksums(b);
       },
       StatusCode::FormatError, "section table (3 entries at offset"},
      {"table checksum",
       [](std::string &b) { *entryField(b, 1, entry_field::kName) ^= 1; },
       StatusCode::FormatError, "section table checksum mismatch"},
      {"unknown section kind",
       [](std::string &b) {
         storeLE32(entryField(b, 1, entry_field::kKind), 9);
         refreshChecksums(b);
       },
       StatusCode::FormatError, "section 1 'weights' has unknown kind 9"},
      {"section flags",
       [](std::string &b) {
         storeLE32(entryField(b, 1, entry_field::kFlags), 1);
         refreshChecksums(b);
       },
       StatusCode::FormatError, "flags and reserved bytes are not zero"},
      {"name not NUL-padded",
       [](std::string &b) {
         *(entryField(b, 1, entry_field::kName) + 20) = 'x';
         refreshChecksums(b);
       },
       StatusCode::FormatError, "section 1: the name is not NUL-padded"},
      {"misaligned section",
       [](std::string &b) {
         uint8_t *offset = entryField(b, 2, entry_field::kOffset);
         storeLE64(offset, loadLE64(offset) + 8);
         refreshChecksums(b);
       },
       StatusCode::FormatError, "section 2 'code.cpu': offset"},
      {"section past the end",
       [](std::string &b) {
         storeLE64(entryField(b, 2, entry_field::kSize), 1u << 20);
         refreshChecksums(b);
       },
       StatusCode::FormatError, "lie outside the"},
      {"section data checksum",
       [](std::string &b) {
         uint64_t weights = loadLE64(entryField(b, 1, entry_field::kOffset));
         b[weights + 5] ^= 0x10;
       },
       StatusCode::FormatError, "section 1 'weights' at offset"},
      {"overlapping sections",
       [](std::string &b) {
         std::memcpy(entryField(b, 2, 0), entryField(b, 1, 0),
                     kSectionEntrySize);
         storeLE32(entryField(b, 2, entry_field::kKind),
                   static_cast<uint32_t>(SectionKind::CpuCode));
         refreshChecksums(b);
       },
       StatusCode::FormatError, "overlaps section"},
      {"padding not zero",
       [](std::string &b) {
         uint64_t weights = loadLE64(entryField(b, 1, entry_field::kOffset));
         b[weights - 1] = 7;
       },
       StatusCode::FormatError, "is not zero padding"},
      {"two manifests",
       [](std::string &b) {
         storeLE32(entryField(b, 1, entry_field::kKind),
                   static_cast<uint32_t>(SectionKind::Manifest));
         refreshChecksums(b);
       },
       StatusCode::FormatError, "sections 0 and 1 are both manifests"},
      {"no manifest",
       [](std::string &b) {
         storeLE32(entryField(b, 0, entry_field::kKind),
                   static_cast<uint32_t>(SectionKind::CpuCode));
         refreshChecksums(b);
       },
       StatusCode::FormatError, "no manifest section"},
  };
  for (const ByteCase &test : cases) {
    SCOPED_TRACE(test.name);
    std::string bytes = multiBundleBytes();
    test.change(bytes);
    expectError(readBytes(bytes), test.code, test.fragment);
    EXPECT_EQ(readBytes(bytes).message().rfind("test.kiln: ", 0), 0u);
  }
}

TEST(BundleReader, RejectsAManifestThatDoesNotParse) {
  std::string garbage = "\xff\xff\xff\xff not a protobuf";
  Parts parts = multiBundleParts();
  std::string bytes = encodeBundle(
      {{SectionKind::Manifest, "manifest", ByteSpan(garbage)},
       {SectionKind::Weights, "weights", ByteSpan(parts.weights)}});
  expectError(readBytes(bytes), StatusCode::FormatError,
              "section 0 at offset 192: the manifest is not a valid "
              "kiln.bundle.Manifest");
}

/// A change to the manifest of a valid bundle and the words its error must
/// contain.
struct ManifestCase {
  const char *name;
  std::function<void(bp::Manifest &)> change;
  std::string fragment;
};

bp::BufferRef *firstBuffer(bp::Manifest &m, int entry, int command = 0) {
  return m.mutable_entry_points(entry)
      ->mutable_commands(command)
      ->mutable_kernel()
      ->mutable_buffers(0);
}

TEST(BundleReader, RejectsEachBrokenManifestRule) {
  const std::vector<ManifestCase> cases = {
      {"no entry points", [](bp::Manifest &m) { m.clear_entry_points(); },
       "manifest has no entry points"},
      {"no targets", [](bp::Manifest &m) { m.clear_targets(); },
       "manifest has no targets"},
      {"duplicate entry point",
       [](bp::Manifest &m) { m.mutable_entry_points(1)->set_name("add_one"); },
       "entry point 1: the name 'add_one' is used twice"},
      {"empty input name",
       [](bp::Manifest &m) {
         m.mutable_entry_points(0)->mutable_inputs(0)->clear_name();
       },
       "entry point 'add_one': input 0 has an empty name"},
      {"NUL in a name",
       [](bp::Manifest &m) {
         m.mutable_entry_points(0)->mutable_outputs(0)->set_name(
             std::string("y\0z", 3));
       },
       "output 0 has a name with a NUL byte"},
      {"unknown element type",
       [](bp::Manifest &m) {
         m.mutable_entry_points(0)->mutable_inputs(0)->set_element_type(
             static_cast<bp::ElementType>(42));
       },
       "input 0 'x' has unknown element type 42"},
      {"negative dimension",
       [](bp::Manifest &m) {
         m.mutable_entry_points(2)->mutable_inputs(1)->set_shape(0, -3);
       },
       "entry point 'mixed': input 1 'flag' has negative dimension 0 (-3)"},
      {"rank too large",
       [](bp::Manifest &m) {
         for (int i = 0; i < 33; ++i)
           m.mutable_entry_points(0)->mutable_inputs(0)->add_shape(1);
       },
       "has rank 34, more than 32"},
      {"tensor too large",
       [](bp::Manifest &m) {
         auto *shape = m.mutable_entry_points(0)->mutable_inputs(0);
         shape->add_shape(int64_t(1) << 40);
         shape->add_shape(int64_t(1) << 40);
       },
       "is larger than 2^62 bytes"},
      {"parameter size",
       [](bp::Manifest &m) { m.mutable_parameters(1)->set_size_bytes(12); },
       "parameter 1 'b': size_bytes 12 does not match its type f32[2,2] (16 "
       "bytes)"},
      {"parameter misaligned",
       [](bp::Manifest &m) { m.mutable_parameters(1)->set_weights_offset(32); },
       "parameter 1 'b': weights_offset 32 is not a multiple of 64"},
      {"parameter outside the weights",
       [](bp::Manifest &m) {
         m.mutable_parameters(2)->set_weights_offset(1 << 20);
       },
       "parameter 2 'acc': bytes [1048576, 1048592) lie outside the"},
      {"unstored parameter inside the weights",
       [](bp::Manifest &m) {
         m.mutable_parameters(2)->set_init(bp::Parameter::ZEROS);
       },
       "parameter 2 'acc': bytes [128, 144) of a parameter without a stored "
       "value lie outside [144, 144), the parameter space past the weights"},
      {"unstored parameter past the parameter space",
       [](bp::Manifest &m) {
         m.mutable_parameters(2)->set_init(bp::Parameter::EXTERNAL);
         m.mutable_parameters(2)->set_weights_offset(192);
         m.set_parameter_bytes(200);
       },
       "parameter 2 'acc': bytes [192, 208) of a parameter without a stored "
       "value lie outside [144, 200)"},
      {"parameter space below the weights",
       [](bp::Manifest &m) { m.set_parameter_bytes(100); },
       "manifest: parameter_bytes 100 is below the weights section's 144 "
       "bytes or above 2^62"},
      {"unknown parameter init",
       [](bp::Manifest &m) {
         m.mutable_parameters(2)->set_init(static_cast<bp::Parameter::Init>(7));
       },
       "parameter 2 'acc' has unknown init 7"},
      {"fixed parameter without a stored value",
       [](bp::Manifest &m) {
         m.mutable_parameters(2)->set_init(bp::Parameter::EXTERNAL);
         m.mutable_parameters(2)->set_weights_offset(192);
         m.set_parameter_bytes(256);
         m.mutable_parameters(2)->set_fixed(true);
       },
       "parameter 2 'acc' is fixed (the code relies on its value) but has "
       "no stored value of its own"},
      {"sharded trainable parameter",
       [](bp::Manifest &m) { m.mutable_parameters(0)->set_shard_ranks(2); },
       "parameter 0 'w': only 1-D f32 optimizer state can be sharded over "
       "the ranks (shard_ranks 2)"},
      {"parameters overlap",
       [](bp::Manifest &m) { m.mutable_parameters(1)->set_weights_offset(0); },
       "parameters overlap in the weights section at offset 0"},
      {"duplicate parameter",
       [](bp::Manifest &m) {
         m.mutable_parameters(2)->mutable_tensor()->set_name("w");
       },
       "parameter 2: the name 'w' is used twice"},
      {"weights section index",
       [](bp::Manifest &m) { m.set_weights_section(2); },
       "weights_section 2 is not a weights section"},
      {"code section index",
       [](bp::Manifest &m) { m.mutable_targets(0)->set_code_section(1); },
       "target 'cpu': code_section 1 is not a code section"},
      {"code section out of range",
       [](bp::Manifest &m) { m.mutable_targets(0)->set_code_section(7); },
       "target 'cpu': code_section 7 is not a code section"},
      {"no kernels",
       [](bp::Manifest &m) { m.mutable_targets(0)->clear_kernels(); },
       "target 'cpu': lists no kernels"},
      {"duplicate kernel",
       [](bp::Manifest &m) { m.mutable_targets(0)->set_kernels(1, "add_one"); },
       "target 'cpu': kernel 1: the name 'add_one' is used twice"},
      {"unlisted kernel",
       [](bp::Manifest &m) {
         m.mutable_entry_points(1)
             ->mutable_commands(1)
             ->mutable_kernel()
             ->set_symbol("relu");
       },
       "entry point 'affine': command 1: calls kernel 'relu', which target "
       "'cpu' does not list"},
      {"empty command",
       [](bp::Manifest &m) { m.mutable_entry_points(3)->add_commands(); },
       "entry point 'accumulate': command 1: is not a kernel call (the CPU "
       "program runs only kernel calls)"},
      {"input index", [](bp::Manifest &m) { firstBuffer(m, 0)->set_index(1); },
       "entry point 'add_one': command 0: (kernel 'add_one') buffer 0: "
       "refers to input 1 of 1"},
      {"output index",
       [](bp::Manifest &m) {
         firstBuffer(m, 0)->set_kind(bp::BufferRef::OUTPUT);
         firstBuffer(m, 0)->set_index(3);
       },
       "refers to output 3 of 1"},
      {"parameter index",
       [](bp::Manifest &m) {
         firstBuffer(m, 0)->set_kind(bp::BufferRef::PARAM);
         firstBuffer(m, 0)->set_index(3);
       },
       "refers to parameter 3 of 3"},
      {"buffer kind",
       [](bp::Manifest &m) {
         firstBuffer(m, 0)->set_kind(static_cast<bp::BufferRef::Kind>(9));
       },
       "buffer 0: has unknown kind 9"},
      {"input range", [](bp::Manifest &m) { firstBuffer(m, 0)->set_offset(4); },
       "buffer 0: bytes [4, +16) lie outside the 16 bytes it refers to"},
      {"arena range",
       [](bp::Manifest &m) { firstBuffer(m, 1, 1)->set_offset(120); },
       "entry point 'affine': command 1: (kernel 'add_param') buffer 0: "
       "bytes [120, +16) lie outside the 128 bytes"},
      {"arena alignment",
       [](bp::Manifest &m) {
         m.mutable_entry_points(1)->set_arena_alignment(48);
       },
       "arena_alignment 48 is not a power of two up to 4096"},
      {"empty metadata key",
       [](bp::Manifest &m) { m.add_metadata()->set_value("1"); },
       "metadata entry 0 has an empty name"},
      {"duplicate metadata key",
       [](bp::Manifest &m) {
         m.add_metadata()->set_key("training.grad_accum");
         m.add_metadata()->set_key("training.grad_accum");
       },
       "metadata entry 1: the name 'training.grad_accum' is used twice"},
      {"NUL in a metadata value",
       [](bp::Manifest &m) {
         bp::MetadataEntry *entry = m.add_metadata();
         entry->set_key("k");
         entry->set_value(std::string("a\0b", 3));
       },
       "metadata entry 0 'k' has a value with a NUL byte"},
      {"arena too large",
       [](bp::Manifest &m) {
         m.mutable_entry_points(1)->set_arena_bytes(~uint64_t(0));
       },
       "entry point 'affine': arena of 18446744073709551615 bytes"},
  };
  for (const ManifestCase &test : cases) {
    SCOPED_TRACE(test.name);
    Parts parts = multiBundleParts();
    test.change(parts.manifest);
    Status status = readBytes(encodeParts(parts));
    expectError(status, StatusCode::FormatError, test.fragment);
    EXPECT_EQ(status.message().rfind("test.kiln: manifest: ", 0), 0u)
        << status.message();
  }
}

/// The CUDA-only test bundle with a stand-in PTX image, and the same with a
/// CPU target added (the hybrid rules need both).
std::string cudaBundleBytes(bool withCpuTarget) {
  BundleWriter writer;
  if (withCpuTarget) {
    buildHybridBundle(writer, standInCode(), "// stand-in PTX");
  } else {
    buildCudaBundle(writer, standInPtxImages());
  }
  std::string bytes;
  Status status = writer.serialize(bytes);
  EXPECT_TRUE(status.ok()) << status.message();
  return bytes;
}

/// `bytes` with its manifest changed by `change` and every section as it
/// was, checksums recomputed.
std::string withManifest(const std::string &bytes,
                         const std::function<void(bp::Manifest &)> &change) {
  std::unique_ptr<BundleReader> reader;
  Status status = BundleReader::fromBuffer(ByteSpan(bytes), "in.kiln", reader);
  EXPECT_TRUE(status.ok()) << status.message();
  bp::Manifest manifest = reader->manifest();
  change(manifest);
  std::string manifestBytes = manifest.SerializeAsString();
  std::vector<SectionContent> sections;
  for (uint32_t i = 0; i < reader->sections().size(); ++i) {
    const SectionEntry &entry = reader->sections()[i];
    bool isManifest =
        entry.kind == static_cast<uint32_t>(SectionKind::Manifest);
    sections.push_back(
        {static_cast<SectionKind>(entry.kind), entry.name,
         isManifest ? ByteSpan(manifestBytes) : reader->sectionBytes(i)});
  }
  return encodeBundle(sections);
}

bp::Program &program(bp::Manifest &m, int entry, int index = 0) {
  return *m.mutable_entry_points(entry)->mutable_programs(index);
}

bp::KernelLaunch &launch(bp::Manifest &m, int entry, int command) {
  return *program(m, entry).mutable_commands(command)->mutable_launch();
}

bp::Gemm &gemm(bp::Manifest &m, int entry, int command) {
  return *program(m, entry).mutable_commands(command)->mutable_gemm();
}

/// The bytes of the bundle `build` makes with a stand-in PTX image.
std::string standInPtxBundleBytes(
    void (*build)(BundleWriter &, std::vector<BundleWriter::Image>)) {
  BundleWriter writer;
  build(writer, standInPtxImages());
  std::string bytes;
  Status status = writer.serialize(bytes);
  EXPECT_TRUE(status.ok()) << status.message();
  return bytes;
}

std::string attentionBundleBytes() {
  return standInPtxBundleBytes(buildCudaAttentionBundle);
}

bp::Attention &attention(bp::Manifest &m, int entry) {
  return *program(m, entry).mutable_commands(0)->mutable_attention();
}

TEST(BundleReader, RejectsEachBrokenAttentionRule) {
  EXPECT_TRUE(readBytes(attentionBundleBytes()).ok());
  // cuDNN's attention reads and writes 16-bit matrices (the f32 buffers
  // are large enough for them), causal (entry 2) or with its mask added
  // (entry 1), with key and value heads a divisor of the query's.
  auto onCudnn = [](bp::Attention &a) {
    a.set_engine(bp::CUDNN);
    a.set_out_type(bp::BF16);
    a.set_input_grad_type(bp::BF16);
  };
  for (int entry : {1, 2})
    for (int64_t keyHeads : {0, 1, 2}) {
      Status cudnn =
          readBytes(withManifest(attentionBundleBytes(), [&](bp::Manifest &m) {
            onCudnn(attention(m, entry));
            attention(m, entry).set_key_heads(keyHeads);
          }));
      EXPECT_TRUE(cudnn.ok()) << cudnn.message();
    }
  struct AttentionCase {
    const char *name;
    std::function<void(bp::Manifest &)> change;
    std::string fragment;
  };
  const std::vector<AttentionCase> cases = {
      {"head size without kernels",
       [](bp::Manifest &m) { attention(m, 0).set_head_size(48); },
       "entry point 'attention': program 0 (target 'cuda') command 0: "
       "attention has head size 48 (the kernels take 16, 32, 64 or 128)"},
      {"f32 operands",
       [](bp::Manifest &m) { attention(m, 0).set_element_type(bp::F32); },
       "attention has element type 1 (bf16 or f16 expected)"},
      {"causal over unequal sides",
       [](bp::Manifest &m) { attention(m, 2).set_keys(70); },
       "attention is causal over 80 queries and 70 keys"},
      {"too many heads",
       [](bp::Manifest &m) { attention(m, 0).set_heads(70000); },
       "batch times heads at most 65535"},
      {"more keys than the kernels count",
       [](bp::Manifest &m) {
         attention(m, 0).set_keys((int64_t(1) << 31) - 1);
       },
       "queries and keys at most 1073741824"},
      {"an f32 tensor at an odd offset",
       [](bp::Manifest &m) {
         attention(m, 0).mutable_out()->mutable_buffer()->set_offset(2);
       },
       "attention out starts at byte offset 2, not a multiple of its 4-byte "
       "elements"},
      {"key buffer too small",
       [](bp::Manifest &m) {
         attention(m, 1).mutable_key()->mutable_buffer()->set_size(100);
       },
       "entry point 'attention_grad': program 0 (target 'cuda') command 0: "
       "attention key needs 20480 elements, but its buffer has 100 bytes"},
      {"negative stride",
       [](bp::Manifest &m) {
         attention(m, 0).mutable_value()->set_row_stride(-1);
       },
       "attention value has strides 10240, 5120, -1"},
      {"output rows written over each other",
       [](bp::Manifest &m) {
         attention(m, 0).mutable_out()->set_row_stride(32);
       },
       "attention out is written with strides 10240, 5120, 32, so its "
       "elements would overlap"},
      {"statistics of one value per row",
       [](bp::Manifest &m) { attention(m, 0).mutable_stats()->set_size(1280); },
       "attention stats has 1280 bytes, not the 2560 of 640 f32 values (2 "
       "per query row)"},
      {"delta of the wrong size",
       [](bp::Manifest &m) { attention(m, 1).mutable_delta()->set_size(2560); },
       "attention delta has 2560 bytes, not the 1280 of 320 f32 values (1 "
       "per query row)"},
      {"masked_fill in the forward",
       [](bp::Manifest &m) { attention(m, 0).set_masked_fill(true); },
       "attention is masked_fill in the forward (only the backward with a "
       "mask takes it)"},
      {"masked_fill without a mask",
       [](bp::Manifest &m) {
         bp::Attention &a = attention(m, 1);
         a.set_masked_fill(true);
         a.clear_mask();
       },
       "attention is masked_fill without a mask (only the backward with a "
       "mask takes it)"},
      {"causal_fill in the forward",
       [](bp::Manifest &m) { attention(m, 0).set_causal_fill(true); },
       "attention is causal_fill in the forward (only the backward with as "
       "many queries as keys takes it)"},
      {"an unknown engine",
       [](bp::Manifest &m) {
         attention(m, 0).set_engine(static_cast<bp::AttentionEngine>(7));
       },
       "attention has engine 7 (the runtime's kernels or cuDNN expected)"},
      {"the runtime's kernels writing 16 bits",
       [](bp::Manifest &m) { attention(m, 0).set_out_type(bp::BF16); },
       "attention has out type bf16 (the runtime's kernels write f32: f32 "
       "expected)"},
      {"cuDNN writing f32 gradients",
       [](bp::Manifest &m) {
         bp::Attention &a = attention(m, 1);
         a.set_engine(bp::CUDNN);
         a.set_out_type(bp::BF16);
       },
       "attention has input gradient type f32 (cuDNN reads and writes every "
       "matrix in the element type: bf16 expected)"},
      {"cuDNN filling masked scores",
       [&](bp::Manifest &m) {
         bp::Attention &a = attention(m, 1);
         onCudnn(a);
         a.set_masked_fill(true);
       },
       "attention on cuDNN with masked_fill or causal_fill is not supported "
       "(cuDNN adds the mask; the runtime's kernels take them)"},
      {"the runtime's kernels grouping heads",
       [](bp::Manifest &m) { attention(m, 0).set_key_heads(1); },
       "attention has 1 key heads for 2 heads (as many: the runtime's "
       "kernels do not group heads expected)"},
      {"key heads not dividing the heads",
       [&](bp::Manifest &m) {
         bp::Attention &a = attention(m, 1);
         onCudnn(a);
         a.set_key_heads(3);
       },
       "attention has 3 key heads for 2 heads (a divisor of them expected)"},
      {"grouped key too small",
       [&](bp::Manifest &m) {
         bp::Attention &a = attention(m, 1);
         onCudnn(a);
         a.set_key_heads(1);
         a.mutable_key()->set_head_stride(0);
         a.mutable_key()->set_batch_stride(20480);
       },
       "attention key needs 25600 elements"},
      {"an output over another",
       [](bp::Manifest &m) {
         bp::Attention &a = attention(m, 1);
         *a.mutable_delta() = a.query_grad().buffer();
         a.mutable_delta()->set_size(1280);
       },
       "attention query_grad, which the attention writes, overlaps attention "
       "delta"},
  };
  for (const AttentionCase &test : cases) {
    SCOPED_TRACE(test.name);
    Status status =
        readBytes(withManifest(attentionBundleBytes(), test.change));
    expectError(status, StatusCode::FormatError, test.fragment);
  }
}

std::string biasGradBundleBytes() {
  return standInPtxBundleBytes(buildCudaBiasGradBundle);
}

TEST(BundleReader, RejectsEachBrokenBiasGradRule) {
  Status valid = readBytes(biasGradBundleBytes());
  EXPECT_TRUE(valid.ok()) << valid.message();
  struct BiasGradCase {
    const char *name;
    std::function<void(bp::Manifest &)> change;
    std::string fragment;
  };
  const std::vector<BiasGradCase> cases = {
      {"sums of B with A's count",
       [](bp::Manifest &m) {
         gemm(m, 1, 0).mutable_bias_grad()->set_size(256);
       },
       "entry point 'weight_in_out': program 0 (target 'cuda') command 0: "
       "gemm bias gradient has 256 bytes, not the 384 of n = 96 values of "
       "C's type"},
      {"sums of A with B's count",
       [](bp::Manifest &m) { gemm(m, 0, 0).set_bias_grad_of_a(false); },
       "gemm bias gradient has 384 bytes, not the 256 of n = 64 values"},
      {"with a batch",
       [](bp::Manifest &m) {
         bp::Gemm &g = gemm(m, 0, 0);
         g.set_batch(2);
         g.set_m(48);
         g.set_stride_a(48);
         g.set_stride_c(48 * 64);
       },
       "gemm has a bias gradient with batch 2 (only a single product "
       "without a bias has one)"},
      {"with a bias",
       [](bp::Manifest &m) {
         bp::Gemm &g = gemm(m, 0, 0);
         *g.mutable_bias() = g.bias_grad();
         g.mutable_bias()->set_size(64 * 4);
       },
       "gemm has a bias gradient with batch 1 and a bias"},
      {"with alpha 2", [](bp::Manifest &m) { gemm(m, 1, 0).set_alpha(2.0f); },
       "gemm has a bias gradient with alpha 2 (only alpha 1 has one)"},
      {"at a byte offset inside an element",
       [](bp::Manifest &m) {
         bp::Gemm &g = gemm(m, 1, 0);
         g.mutable_bias_grad()->set_offset(2);
         g.mutable_bias_grad()->set_size(96 * 4);
       },
       "gemm bias gradient starts at byte offset 2, not a multiple of its "
       "4-byte elements"},
      {"inside C",
       [](bp::Manifest &m) {
         bp::Gemm &g = gemm(m, 0, 0);
         *g.mutable_bias_grad() = g.c();
         g.mutable_bias_grad()->set_size(96 * 4);
       },
       "gemm bias gradient overlaps matrix C, which the product reads or "
       "writes while the epilogue writes the gradient"},
      {"outside its buffer",
       [](bp::Manifest &m) {
         gemm(m, 1, 0).mutable_bias_grad()->set_offset(8);
       },
       "gemm bias gradient"},
      // The GELU epilogues (64 x 96 f32 products here).
      {"an auxiliary matrix without an epilogue",
       [](bp::Manifest &m) {
         bp::Gemm &g = gemm(m, 1, 0);
         *g.mutable_aux() = g.bias_grad();
       },
       "gemm has an auxiliary matrix but no GELU epilogue"},
      {"an unknown epilogue",
       [](bp::Manifest &m) {
         gemm(m, 1, 0).set_epilogue(static_cast<bp::GemmEpilogue>(9));
       },
       "gemm has epilogue 9 (none, GELU or its derivative expected)"},
      {"a GELU beside a bias gradient",
       [](bp::Manifest &m) { gemm(m, 1, 0).set_epilogue(bp::GEMM_GELU); },
       "gemm has a GELU epilogue with batch 1, beta 0 (only a single "
       "product overwriting C, without a bias gradient, has one)"},
      {"a DGELU without its input",
       [](bp::Manifest &m) {
         bp::Gemm &g = gemm(m, 1, 0);
         g.clear_bias_grad();
         g.set_epilogue(bp::GEMM_DGELU);
       },
       "gemm has a DGELU epilogue without its auxiliary matrix (the GELU's "
       "input)"},
      {"an auxiliary matrix of the wrong size",
       [](bp::Manifest &m) {
         bp::Gemm &g = gemm(m, 1, 0);
         *g.mutable_aux() = g.bias_grad();
         g.clear_bias_grad();
         g.set_epilogue(bp::GEMM_GELU);
       },
       "gemm auxiliary matrix has 384 bytes at offset 0, not the 24576 of a "
       "dense m x n matrix of C's type at a whole element"},
      {"an auxiliary matrix over C",
       [](bp::Manifest &m) {
         bp::Gemm &g = gemm(m, 1, 0);
         *g.mutable_aux() = g.c();
         g.clear_bias_grad();
         g.set_epilogue(bp::GEMM_DGELU);
       },
       "gemm auxiliary matrix overlaps matrix C"},
  };
  for (const BiasGradCase &test : cases) {
    SCOPED_TRACE(test.name);
    Status status = readBytes(withManifest(biasGradBundleBytes(), test.change));
    expectError(status, StatusCode::FormatError, test.fragment);
  }
}

std::string layerNormBundleBytes() {
  return standInPtxBundleBytes(buildCudaLayerNormBundle);
}

/// The layer norm of entry point `entry` of the layer-norm bundle: 0 the
/// bf16 forward with a bias, 1 the f32 forward without, 2 the backward, 3
/// the f16 forward, 4 the bf16 forward with a bias and a residual (inputs x,
/// scale, bias, residual; outputs y, sum), 5 the backward with an
/// accumulated input gradient (inputs x, scale, grad, accumulate), 6 that
/// backward also writing its input gradient rounded to bf16 (output 4), 7
/// the backward without an accumulate rounding it to f16 (output 4), 8 the
/// f32 forward with a bias and a residual also writing its output rounded
/// to bf16 (outputs y, sum, y_rounded).
bp::LayerNorm &layerNorm(bp::Manifest &m, int entry) {
  return *program(m, entry).mutable_commands(0)->mutable_layer_norm();
}

TEST(BundleReader, RejectsEachBrokenLayerNormRule) {
  Status valid = readBytes(layerNormBundleBytes());
  EXPECT_TRUE(valid.ok()) << valid.message();
  struct LayerNormCase {
    const char *name;
    std::function<void(bp::Manifest &)> change;
    std::string fragment;
  };
  const std::vector<LayerNormCase> cases = {
      {"no rows", [](bp::Manifest &m) { layerNorm(m, 0).set_rows(0); },
       "entry point 'layer_norm': program 0 (target 'cuda') command 0: "
       "layer norm has rows 0, cols 300 (each 1 to 2147483647, rows times "
       "cols at most 2^60)"},
      {"negative cols", [](bp::Manifest &m) { layerNorm(m, 2).set_cols(-4); },
       "entry point 'layer_norm_grad': program 0 (target 'cuda') command 0: "
       "layer norm backward has rows 70, cols -4"},
      {"more columns than a grid has threads",
       [](bp::Manifest &m) { layerNorm(m, 1).set_cols(int64_t(1) << 31); },
       "layer norm has rows 70, cols 2147483648 (each 1 to 2147483647"},
      {"more elements than bytes can count",
       [](bp::Manifest &m) {
         layerNorm(m, 1).set_rows((int64_t(1) << 31) - 1);
         layerNorm(m, 1).set_cols((int64_t(1) << 31) - 1);
       },
       "rows times cols at most 2^60"},
      {"epsilon 0", [](bp::Manifest &m) { layerNorm(m, 0).set_epsilon(0); },
       "layer norm has epsilon 0 (finite and positive expected)"},
      {"negative epsilon",
       [](bp::Manifest &m) { layerNorm(m, 2).set_epsilon(-1e-5f); },
       "layer norm backward has epsilon -1e-05 (finite and positive "
       "expected)"},
      {"NaN epsilon", [](bp::Manifest &m) { layerNorm(m, 1).set_epsilon(NAN); },
       "(finite and positive expected)"},
      {"infinite epsilon",
       [](bp::Manifest &m) { layerNorm(m, 1).set_epsilon(INFINITY); },
       "layer norm has epsilon inf"},
      {"forward without an output type",
       [](bp::Manifest &m) {
         layerNorm(m, 1).set_output_type(bp::ELEMENT_TYPE_UNSPECIFIED);
       },
       "layer norm has output type 0 (f32, bf16 or f16 expected)"},
      {"forward to integers",
       [](bp::Manifest &m) { layerNorm(m, 1).set_output_type(bp::I32); },
       "layer norm has output type 6 (f32, bf16 or f16 expected)"},
      {"backward with a bf16 output type but no output",
       [](bp::Manifest &m) { layerNorm(m, 2).set_output_type(bp::BF16); },
       "entry point 'layer_norm_grad': program 0 (target 'cuda') command 0: "
       "layer norm backward has output type 3 but no output (the output type "
       "is set exactly when the output is)"},
      {"backward with an f32 output type and no output",
       [](bp::Manifest &m) { layerNorm(m, 5).set_output_type(bp::F32); },
       "layer norm backward has output type 1 but no output"},
      {"backward with an output type and an output of size 0",
       [](bp::Manifest &m) { layerNorm(m, 7).mutable_output()->set_size(0); },
       "entry point 'layer_norm_grad_f16': program 0 (target 'cuda') command "
       "0: layer norm backward has output type 2 but no output"},
      {"no scale", [](bp::Manifest &m) { layerNorm(m, 0).clear_scale(); },
       "layer norm has no scale"},
      {"an empty input",
       [](bp::Manifest &m) { layerNorm(m, 1).mutable_input()->set_size(0); },
       "layer norm has no input"},
      {"no output", [](bp::Manifest &m) { layerNorm(m, 3).clear_output(); },
       "entry point 'layer_norm_f16': program 0 (target 'cuda') command 0: "
       "layer norm has no output"},
      {"backward without partials",
       [](bp::Manifest &m) { layerNorm(m, 2).clear_partials(); },
       "layer norm backward has no partials"},
      {"backward without grad",
       [](bp::Manifest &m) { layerNorm(m, 2).clear_grad(); },
       "layer norm backward has no grad"},
      {"input too small",
       [](bp::Manifest &m) { layerNorm(m, 0).mutable_input()->set_size(100); },
       "layer norm input has 100 bytes, not the 84000 of f32[70,300]"},
      {"bf16 output for f32 values",
       [](bp::Manifest &m) { layerNorm(m, 0).set_output_type(bp::F32); },
       "layer norm output has 42000 bytes, not the 84000 of f32[70,300]"},
      {"f32 output for bf16 values",
       [](bp::Manifest &m) { layerNorm(m, 1).set_output_type(bp::BF16); },
       "layer norm output has 84000 bytes, not the 42000 of bf16[70,300]"},
      {"bias one value short",
       [](bp::Manifest &m) { layerNorm(m, 0).mutable_bias()->set_size(1196); },
       "layer norm bias has 1196 bytes, not the 1200 of f32[300]"},
      {"scale_grad too large",
       [](bp::Manifest &m) {
         layerNorm(m, 2).mutable_scale_grad()->set_size(1204);
       },
       "layer norm backward scale_grad has 1204 bytes, not the 1200 of "
       "f32[300]"},
      {"partials for two blocks of three",
       [](bp::Manifest &m) {
         layerNorm(m, 2).mutable_partials()->set_size(4800);
       },
       "layer norm backward partials has 4800 bytes, fewer than the 7200 of "
       "f32[3,2,300]"},
      {"a bf16 output inside an element",
       [](bp::Manifest &m) { layerNorm(m, 0).mutable_output()->set_offset(1); },
       "layer norm output starts at byte offset 1, not a multiple of its "
       "2-byte elements"},
      {"an f32 input inside an element",
       [](bp::Manifest &m) { layerNorm(m, 2).mutable_grad()->set_offset(2); },
       "layer norm backward grad starts at byte offset 2, not a multiple of "
       "its 4-byte elements"},
      {"bias outside its buffer",
       [](bp::Manifest &m) { layerNorm(m, 0).mutable_bias()->set_offset(4); },
       "layer norm bias: bytes [4, +1200) lie outside the 1200 bytes it "
       "refers to"},
      {"partials in an input that does not exist",
       [](bp::Manifest &m) {
         layerNorm(m, 2).mutable_partials()->set_kind(bp::BufferRef::INPUT);
         layerNorm(m, 2).mutable_partials()->set_index(7);
       },
       "layer norm backward partials: refers to input 7 of 3"},
      {"backward with a bias",
       [](bp::Manifest &m) {
         bp::LayerNorm &l = layerNorm(m, 2);
         *l.mutable_bias() = l.scale();
       },
       "layer norm backward sets bias, which it does not use"},
      {"backward with an output but no output type",
       [](bp::Manifest &m) {
         bp::LayerNorm &l = layerNorm(m, 2);
         *l.mutable_output() = l.input_grad();
         l.mutable_output()->set_size(42000);
       },
       "entry point 'layer_norm_grad': program 0 (target 'cuda') command 0: "
       "layer norm backward has output type 0 (bf16 or f16 expected: its "
       "output is the input gradient rounded to 16 bits)"},
      {"a copy of a bf16 output",
       [](bp::Manifest &m) {
         bp::LayerNorm &l = layerNorm(m, 8);
         l.set_output_type(bp::BF16);
         l.mutable_output()->set_size(42000);
       },
       "entry point 'layer_norm_copy': program 0 (target 'cuda') command 0: "
       "layer norm has output type 3 and copy type 3 (f32 and bf16 or f16 "
       "expected: its copy is the output rounded to 16 bits)"},
      {"an f32 copy",
       [](bp::Manifest &m) { layerNorm(m, 8).set_copy_type(bp::F32); },
       "layer norm has output type 1 and copy type 1"},
      {"a copy type without a copy",
       [](bp::Manifest &m) { layerNorm(m, 1).set_copy_type(bp::BF16); },
       "layer norm has copy type 3 but no copy (the copy type is set "
       "exactly when the copy is)"},
      {"a bf16 input without a residual",
       [](bp::Manifest &m) { layerNorm(m, 0).set_input_type(bp::BF16); },
       "layer norm has input type 3 (f32 expected: 16 bits only with a "
       "residual)"},
      {"a residual type in a backward",
       [](bp::Manifest &m) { layerNorm(m, 2).set_residual_type(bp::BF16); },
       "layer norm backward has residual type 3 (f32 expected)"},
      {"an f64 accumulate",
       [](bp::Manifest &m) { layerNorm(m, 2).set_accumulate_type(bp::F64); },
       "layer norm backward has accumulate type 4 (f32 expected, or bf16 or "
       "f16)"},
      {"a bf16 grad of f32 size",
       [](bp::Manifest &m) { layerNorm(m, 2).set_grad_type(bp::BF16); },
       "layer norm backward grad has"},
      {"a copy of size 0 with its type",
       [](bp::Manifest &m) { layerNorm(m, 8).mutable_copy()->set_size(0); },
       "layer norm has copy type 3 but no copy"},
      {"a copy of f32 size",
       [](bp::Manifest &m) { layerNorm(m, 8).mutable_copy()->set_size(84000); },
       "layer norm copy has 84000 bytes, not the 42000 of bf16[70,300]"},
      {"a copy over the output",
       [](bp::Manifest &m) {
         bp::LayerNorm &l = layerNorm(m, 8);
         *l.mutable_copy() = l.output();
         l.mutable_copy()->set_size(42000);
       },
       "layer norm copy"},
      {"backward with a copy",
       [](bp::Manifest &m) {
         bp::LayerNorm &l = layerNorm(m, 2);
         *l.mutable_copy() = l.input_grad();
         l.mutable_copy()->set_size(42000);
       },
       "layer norm backward sets copy, which it does not use"},
      {"backward rounding to f32",
       [](bp::Manifest &m) { layerNorm(m, 6).set_output_type(bp::F32); },
       "layer norm backward has output type 1 (bf16 or f16 expected"},
      {"backward rounding to integers",
       [](bp::Manifest &m) { layerNorm(m, 7).set_output_type(bp::I32); },
       "layer norm backward has output type 6 (bf16 or f16 expected"},
      {"a rounded input gradient of f32 size",
       [](bp::Manifest &m) {
         layerNorm(m, 6).mutable_output()->set_size(84000);
       },
       "entry point 'layer_norm_grad_accumulate_bf16': program 0 (target "
       "'cuda') command 0: layer norm backward output has 84000 bytes, not "
       "the 42000 of bf16[70,300]"},
      {"a rounded input gradient one value short",
       [](bp::Manifest &m) {
         layerNorm(m, 7).mutable_output()->set_size(41998);
       },
       "layer norm backward output has 41998 bytes, not the 42000 of "
       "f16[70,300]"},
      {"a rounded input gradient inside an element",
       [](bp::Manifest &m) { layerNorm(m, 7).mutable_output()->set_offset(1); },
       "layer norm backward output starts at byte offset 1, not a multiple "
       "of its 2-byte elements"},
      {"a rounded input gradient outside its buffer",
       [](bp::Manifest &m) { layerNorm(m, 6).mutable_output()->set_offset(2); },
       "layer norm backward output: bytes [2, +42000) lie outside the 42000 "
       "bytes it refers to"},
      {"a rounded input gradient over the input gradient",
       [](bp::Manifest &m) {
         bp::LayerNorm &l = layerNorm(m, 6);
         *l.mutable_output() = l.input_grad();
         l.mutable_output()->set_size(42000);
       },
       "layer norm backward output, which the layer norm writes, overlaps "
       "layer norm backward input_grad"},
      {"a rounded input gradient over grad",
       [](bp::Manifest &m) {
         bp::LayerNorm &l = layerNorm(m, 7);
         *l.mutable_output() = l.grad();
         l.mutable_output()->set_size(42000);
       },
       "layer norm backward output, which the layer norm writes, overlaps "
       "layer norm backward grad"},
      {"a rounded input gradient over accumulate",
       [](bp::Manifest &m) {
         bp::LayerNorm &l = layerNorm(m, 6);
         *l.mutable_output() = l.accumulate();
         l.mutable_output()->set_offset(42000);
         l.mutable_output()->set_size(42000);
       },
       "layer norm backward output, which the layer norm writes, overlaps "
       "layer norm backward accumulate"},
      {"partials over the rounded input gradient",
       [](bp::Manifest &m) {
         bp::LayerNorm &l = layerNorm(m, 7);
         *l.mutable_partials() = l.output();
       },
       "layer norm backward output, which the layer norm writes, overlaps "
       "layer norm backward partials"},
      {"a rounded input gradient under an all-reduce in flight",
       [](bp::Manifest &m) {
         bp::Program &p = program(m, 6);
         bp::Command command = p.commands(0);
         p.clear_commands();
         bp::AllReduceMean &reduce =
             *p.add_commands()->mutable_all_reduce_mean();
         reduce.set_element_type(bp::F32);
         reduce.set_count(10500);
         *reduce.mutable_buffer() = command.layer_norm().output();
         reduce.set_request(1);
         *p.add_commands() = command;
         p.add_commands()->mutable_collective_wait()->set_request(1);
       },
       "entry point 'layer_norm_grad_accumulate_bf16': program 0 (target "
       "'cuda') command 1: layer norm backward output touches the buffer of "
       "request 1 (the all-reduce of command 0), which is still outstanding"},
      {"forward with partials",
       [](bp::Manifest &m) {
         bp::LayerNorm &l = layerNorm(m, 1);
         *l.mutable_partials() = l.output();
       },
       "layer norm sets partials, which it does not use"},
      {"forward with a grad",
       [](bp::Manifest &m) {
         bp::LayerNorm &l = layerNorm(m, 0);
         *l.mutable_grad() = l.input();
       },
       "layer norm sets grad, which it does not use"},
      {"output over the input",
       [](bp::Manifest &m) {
         bp::LayerNorm &l = layerNorm(m, 1);
         *l.mutable_output() = l.input();
       },
       "entry point 'layer_norm_f32': program 0 (target 'cuda') command 0: "
       "layer norm output, which the layer norm writes, overlaps layer norm "
       "input"},
      {"output over the scale",
       [](bp::Manifest &m) {
         bp::LayerNorm &l = layerNorm(m, 0);
         l.mutable_output()->set_kind(bp::BufferRef::INPUT);
         l.mutable_output()->set_index(1);
         l.mutable_output()->set_size(600);
         l.set_rows(2);
         l.set_cols(150);
         l.mutable_input()->set_size(1200);
         l.mutable_scale()->set_size(600);
         l.mutable_bias()->set_size(600);
       },
       "layer norm output, which the layer norm writes, overlaps layer norm "
       "scale"},
      {"input gradient over grad",
       [](bp::Manifest &m) {
         bp::LayerNorm &l = layerNorm(m, 2);
         *l.mutable_input_grad() = l.grad();
       },
       "layer norm backward input_grad, which the layer norm writes, overlaps "
       "layer norm backward grad"},
      {"the two vector gradients in one place",
       [](bp::Manifest &m) {
         bp::LayerNorm &l = layerNorm(m, 2);
         *l.mutable_bias_grad() = l.scale_grad();
       },
       "layer norm backward scale_grad, which the layer norm writes, overlaps "
       "layer norm backward bias_grad"},
      {"partials over the input gradient",
       [](bp::Manifest &m) {
         bp::LayerNorm &l = layerNorm(m, 2);
         *l.mutable_partials() = l.input_grad();
       },
       "layer norm backward input_grad, which the layer norm writes, overlaps "
       "layer norm backward partials"},
      {"partials over the input",
       [](bp::Manifest &m) {
         bp::LayerNorm &l = layerNorm(m, 2);
         l.mutable_partials()->set_kind(bp::BufferRef::INPUT);
         l.mutable_partials()->set_index(0);
       },
       "layer norm backward partials, which the layer norm writes, overlaps "
       "layer norm backward input"},
      {"bias under an all-reduce in flight",
       [](bp::Manifest &m) {
         bp::Program &p = program(m, 0);
         bp::Command command = p.commands(0);
         p.clear_commands();
         bp::AllReduceMean &reduce =
             *p.add_commands()->mutable_all_reduce_mean();
         reduce.set_element_type(bp::F32);
         reduce.set_count(300);
         *reduce.mutable_buffer() = command.layer_norm().bias();
         reduce.set_request(1);
         *p.add_commands() = command;
         p.add_commands()->mutable_collective_wait()->set_request(1);
       },
       "entry point 'layer_norm': program 0 (target 'cuda') command 1: layer "
       "norm bias touches the buffer of request 1 (the all-reduce of command "
       "0), which is still outstanding"},
      {"a residual without a sum",
       [](bp::Manifest &m) { layerNorm(m, 4).clear_sum(); },
       "entry point 'layer_norm_residual': program 0 (target 'cuda') command "
       "0: layer norm has a residual but no sum (the sum is set exactly when "
       "the residual is)"},
      {"a residual with a sum of size 0",
       [](bp::Manifest &m) { layerNorm(m, 4).mutable_sum()->set_size(0); },
       "layer norm has a residual but no sum"},
      {"a sum without a residual",
       [](bp::Manifest &m) { layerNorm(m, 4).clear_residual(); },
       "layer norm sets sum without a residual (the sum is set exactly when "
       "the residual is)"},
      {"a sum with a residual of size 0",
       [](bp::Manifest &m) { layerNorm(m, 4).mutable_residual()->set_size(0); },
       "layer norm sets sum without a residual"},
      {"residual one row short",
       [](bp::Manifest &m) {
         layerNorm(m, 4).mutable_residual()->set_size(82800);
       },
       "layer norm residual has 82800 bytes, not the 84000 of f32[70,300]"},
      {"a sum of bf16 size",
       [](bp::Manifest &m) { layerNorm(m, 4).mutable_sum()->set_size(42000); },
       "layer norm sum has 42000 bytes, not the 84000 of f32[70,300]"},
      {"a residual inside an element",
       [](bp::Manifest &m) {
         layerNorm(m, 4).mutable_residual()->set_offset(2);
       },
       "layer norm residual starts at byte offset 2, not a multiple of its "
       "4-byte elements"},
      {"a sum inside an element",
       [](bp::Manifest &m) { layerNorm(m, 4).mutable_sum()->set_offset(1); },
       "layer norm sum starts at byte offset 1, not a multiple of its 4-byte "
       "elements"},
      {"residual outside its buffer",
       [](bp::Manifest &m) {
         layerNorm(m, 4).mutable_residual()->set_offset(4);
       },
       "layer norm residual: bytes [4, +84000) lie outside the 84000 bytes it "
       "refers to"},
      {"sum over the input",
       [](bp::Manifest &m) {
         bp::LayerNorm &l = layerNorm(m, 4);
         *l.mutable_sum() = l.input();
       },
       "layer norm sum, which the layer norm writes, overlaps layer norm "
       "input"},
      {"sum over the residual",
       [](bp::Manifest &m) {
         bp::LayerNorm &l = layerNorm(m, 4);
         *l.mutable_sum() = l.residual();
       },
       "layer norm sum, which the layer norm writes, overlaps layer norm "
       "residual"},
      {"output inside the sum",
       [](bp::Manifest &m) {
         bp::LayerNorm &l = layerNorm(m, 4);
         *l.mutable_output() = l.sum();
         l.mutable_output()->set_size(42000);
       },
       "layer norm output, which the layer norm writes, overlaps layer norm "
       "sum"},
      {"forward with an accumulate",
       [](bp::Manifest &m) {
         bp::LayerNorm &l = layerNorm(m, 0);
         *l.mutable_accumulate() = l.input();
       },
       "layer norm sets accumulate, which it does not use"},
      {"backward with a residual",
       [](bp::Manifest &m) {
         bp::LayerNorm &l = layerNorm(m, 5);
         *l.mutable_residual() = l.input();
       },
       "layer norm backward sets residual, which it does not use"},
      {"backward with a sum",
       [](bp::Manifest &m) {
         bp::LayerNorm &l = layerNorm(m, 2);
         *l.mutable_sum() = l.input_grad();
       },
       "layer norm backward sets sum, which it does not use"},
      {"accumulate one value short",
       [](bp::Manifest &m) {
         layerNorm(m, 5).mutable_accumulate()->set_size(83996);
       },
       "entry point 'layer_norm_grad_accumulate': program 0 (target 'cuda') "
       "command 0: layer norm backward accumulate has 83996 bytes, not the "
       "84000 of f32[70,300]"},
      {"accumulate inside an element",
       [](bp::Manifest &m) {
         layerNorm(m, 5).mutable_accumulate()->set_offset(2);
       },
       "layer norm backward accumulate starts at byte offset 2, not a "
       "multiple of its 4-byte elements"},
      {"accumulate in an input that does not exist",
       [](bp::Manifest &m) {
         layerNorm(m, 5).mutable_accumulate()->set_index(7);
       },
       "layer norm backward accumulate: refers to input 7 of 4"},
      {"input gradient over accumulate",
       [](bp::Manifest &m) {
         bp::LayerNorm &l = layerNorm(m, 5);
         *l.mutable_input_grad() = l.accumulate();
       },
       "layer norm backward input_grad, which the layer norm writes, overlaps "
       "layer norm backward accumulate"},
  };
  for (const LayerNormCase &test : cases) {
    SCOPED_TRACE(test.name);
    Status status =
        readBytes(withManifest(layerNormBundleBytes(), test.change));
    expectError(status, StatusCode::FormatError, test.fragment);
  }
}

/// Partial sums in scratch larger than they need, as a shared arena slot
/// may be, and a forward without a bias (unset, or of size 0).
TEST(BundleReader, AcceptsLargerLayerNormPartialsAndNoBias) {
  Status status =
      readBytes(withManifest(layerNormBundleBytes(), [](bp::Manifest &m) {
        program(m, 2).set_arena_bytes(8192);
        bp::BufferRef &partials = *layerNorm(m, 2).mutable_partials();
        partials.set_kind(bp::BufferRef::ARENA);
        partials.set_offset(512);
        partials.set_size(7680);
        layerNorm(m, 0).mutable_bias()->set_size(0);
      }));
  EXPECT_TRUE(status.ok()) << status.message();
}

/// A residual and its sum, an accumulate, or a backward's output (with its
/// output type unset), of size 0: none. Buffers the layer norm only reads
/// may overlap: a residual that is the input itself, an accumulate that is
/// the grad.
TEST(BundleReader, AcceptsLayerNormResidualsOfSizeZeroAndOverlappingReads) {
  Status status =
      readBytes(withManifest(layerNormBundleBytes(), [](bp::Manifest &m) {
        layerNorm(m, 4).mutable_residual()->set_size(0);
        layerNorm(m, 4).mutable_sum()->set_size(0);
        layerNorm(m, 5).mutable_accumulate()->set_size(0);
        layerNorm(m, 7).mutable_output()->set_size(0);
        layerNorm(m, 7).set_output_type(bp::ELEMENT_TYPE_UNSPECIFIED);
      }));
  EXPECT_TRUE(status.ok()) << status.message();
  status = readBytes(withManifest(layerNormBundleBytes(), [](bp::Manifest &m) {
    bp::LayerNorm &forward = layerNorm(m, 4), &backward = layerNorm(m, 5);
    *forward.mutable_residual() = forward.input();
    *backward.mutable_accumulate() = backward.grad();
  }));
  EXPECT_TRUE(status.ok()) << status.message();
}

TEST(BundleReader, AcceptsTheCudaBundles) {
  EXPECT_TRUE(readBytes(cudaBundleBytes(false)).ok());
  EXPECT_TRUE(readBytes(cudaBundleBytes(true)).ok());
}

TEST(BundleReader, AcceptsAGemmBiasOfNValues) {
  Status status =
      readBytes(withManifest(cudaBundleBytes(false), [](bp::Manifest &m) {
        bp::Gemm &g = gemm(m, 2, 0);
        *g.mutable_bias() = g.a();
        g.mutable_bias()->set_size(static_cast<uint64_t>(g.n()) * 4);
      }));
  EXPECT_TRUE(status.ok()) << status.message();
}

TEST(BundleReader, RejectsEachBrokenCudaRule) {
  struct CudaCase {
    const char *name;
    bool withCpuTarget;
    std::function<void(bp::Manifest &)> change;
    std::string fragment;
  };
  const std::vector<CudaCase> cases = {
      {"launch of a kernel out of range", false,
       [](bp::Manifest &m) { launch(m, 0, 1).set_kernel(7); },
       "entry point 'affine': program 0 (target 'cuda') command 1: launches "
       "kernel 7 of 5"},
      {"block over 1024 threads", false,
       [](bp::Manifest &m) {
         launch(m, 1, 0).set_block(0, 64);
         launch(m, 1, 0).set_block(1, 32);
       },
       "(kernel 'accumulate') has blocks of 2048 threads, more than 1024"},
      {"grid of rank 2", false,
       [](bp::Manifest &m) { launch(m, 0, 1).mutable_grid()->RemoveLast(); },
       "(kernel 'add_bias') needs three grid and three block dimensions"},
      {"empty block", false,
       [](bp::Manifest &m) { launch(m, 0, 1).set_block(2, 0); },
       "(kernel 'add_bias') has an empty grid or block"},
      {"gemm buffer too small for its leading dimension", false,
       [](bp::Manifest &m) { gemm(m, 0, 0).set_ldb(4); },
       "command 0: gemm matrix B needs 15 elements, but its buffer has 48 "
       "bytes"},
      {"gemm buffer too small for its batch stride", false,
       [](bp::Manifest &m) { gemm(m, 2, 0).set_stride_b(30); },
       "gemm matrix B needs 50 elements, but its buffer has 160 bytes"},
      {"gemm leading dimension below the width", false,
       [](bp::Manifest &m) { gemm(m, 2, 0).set_lda(2); },
       "gemm matrix A (5 x 3) has leading dimension 2"},
      {"unknown gemm element type", false,
       [](bp::Manifest &m) {
         gemm(m, 0, 0).set_a_type(static_cast<bp::ElementType>(42));
       },
       "gemm matrix A has element type 42 (f32, f16 or bf16 expected)"},
      {"gemm of f64", false,
       [](bp::Manifest &m) { gemm(m, 0, 0).set_c_type(bp::F64); },
       "gemm matrix C has element type 4 (f32, f16 or bf16 expected)"},
      {"gemm of i32", false,
       [](bp::Manifest &m) { gemm(m, 0, 0).set_b_type(bp::I32); },
       "gemm matrix B has element type 6 (f32, f16 or bf16 expected)"},
      {"batched gemm writing one C", false,
       [](bp::Manifest &m) { gemm(m, 2, 0).set_stride_c(0); },
       "gemm matrix C has batch stride 0, so the 2 products of the batch "
       "would overlap"},
      {"empty gemm", false, [](bp::Manifest &m) { gemm(m, 2, 0).set_k(0); },
       "gemm has sizes m 3, n 4, k 0, batch 2"},
      {"gemm bias of another size than n", false,
       [](bp::Manifest &m) {
         bp::Gemm &g = gemm(m, 2, 0);
         *g.mutable_bias() = g.c();
         g.mutable_bias()->set_size(12);
       },
       "gemm bias has 12 bytes, not the 16 of n = 4 values of C's type"},
      {"gemm bias inside C", false,
       [](bp::Manifest &m) {
         bp::Gemm &g = gemm(m, 2, 0);
         *g.mutable_bias() = g.c();
         g.mutable_bias()->set_size(16);
       },
       "gemm bias overlaps matrix C"},
      {"gemm bias outside its buffer", false,
       [](bp::Manifest &m) {
         bp::Gemm &g = gemm(m, 2, 0);
         *g.mutable_bias() = g.c();
         g.mutable_bias()->set_offset(g.c().offset() + (uint64_t(1) << 40));
         g.mutable_bias()->set_size(16);
       },
       "gemm bias"},
      {"program for an unknown target", false,
       [](bp::Manifest &m) { program(m, 1).set_target("tpu"); },
       "entry point 'accumulate': program 0 (target 'tpu') does not name a "
       "CUDA target"},
      {"program for the CPU target", true,
       [](bp::Manifest &m) { program(m, 0).set_target("cpu"); },
       "program 0 (target 'cpu') does not name a CUDA target"},
      {"two programs for one target", false,
       [](bp::Manifest &m) {
         bp::EntryPoint &entry = *m.mutable_entry_points(3);
         *entry.add_programs() = entry.programs(0);
       },
       "entry point 'add_one': program 1 (target 'cuda'): the target has two "
       "programs"},
      {"entry point without a program for the CUDA target", true,
       [](bp::Manifest &m) { m.mutable_entry_points(0)->clear_programs(); },
       "entry point 'add_one': has no program for target 'cuda'"},
      {"image in a section of the wrong kind", false,
       [](bp::Manifest &m) {
         m.mutable_targets(0)->mutable_images(0)->set_section(1);
       },
       "target 'cuda': image 0: section 1 is not a cuda ptx section"},
      {"PTX image in a cubin section", false,
       [](bp::Manifest &m) {
         m.mutable_targets(0)->mutable_images(0)->set_format(
             bp::CodeImage::CUBIN);
       },
       "section 2 is not a cuda cubin section"},
      {"CUDA target without images", false,
       [](bp::Manifest &m) { m.mutable_targets(0)->clear_images(); },
       "target 'cuda': lists no code images"},
      {"CPU kernel call in a bundle with only a CUDA target", false,
       [](bp::Manifest &m) {
         bp::KernelCall *call =
             m.mutable_entry_points(3)->add_commands()->mutable_kernel();
         call->set_symbol("add_one");
       },
       "entry point 'add_one': command 0: is a CPU kernel call, but the "
       "bundle has no CPU target"},
      {"launch in the CPU command list", true,
       [](bp::Manifest &m) {
         *m.mutable_entry_points(0)->add_commands() = program(m, 0).commands(0);
       },
       "command 1: is not a kernel call"},
      {"kernel call in a CUDA program", true,
       [](bp::Manifest &m) {
         *program(m, 0).add_commands() = m.entry_points(0).commands(0);
       },
       "program 0 (target 'cuda') command 1: is not a kernel launch, a gemm, "
       "an attention, a layer norm, an all-reduce, a shard collective or a "
       "collective wait"},
      {"empty command in a CUDA program", false,
       [](bp::Manifest &m) { program(m, 3).add_commands(); },
       "entry point 'add_one': program 0 (target 'cuda') command 1: is not a "
       "kernel launch, a gemm, an attention, a layer norm, an all-reduce, a "
       "shard collective or a collective wait"},
  };
  for (const CudaCase &test : cases) {
    SCOPED_TRACE(test.name);
    Status status = readBytes(
        withManifest(cudaBundleBytes(test.withCpuTarget), test.change));
    expectError(status, StatusCode::FormatError, test.fragment);
  }
}

/// The CUDA all-reduce bundle (TestBundles.h) with a stand-in PTX image.
/// Its program: 0 add_one into arena [64, 80), 1 all-reduce of it (request
/// 1), 2 accumulate (x, acc, total), 3 all-reduce of acc (request 2), 4 wait
/// 1, 5 add_one from the arena into y, 6 wait 2.
std::string cudaAllReduceBundleBytes() {
  return standInPtxBundleBytes(buildCudaAllReduceBundle);
}

bp::AllReduceMean &allReduce(bp::Manifest &m, int command) {
  return *program(m, 0).mutable_commands(command)->mutable_all_reduce_mean();
}

/// Appends to the all-reduce bundle's program a sharded optimizer's
/// command (over 2 ranks, 4 values per rank: input arena [0, 32), output
/// [96, 112) for a reduce-scatter or local shard) and, for a request, its
/// wait; returns the command.
bp::ShardCollective &
appendShard(bp::Manifest &m, bp::ShardCollective::Kind kind, uint32_t request);

bp::BufferRef arenaBytes(uint64_t offset, uint64_t size) {
  bp::BufferRef ref;
  ref.set_kind(bp::BufferRef::ARENA);
  ref.set_offset(offset);
  ref.set_size(size);
  return ref;
}

TEST(BundleReader, AcceptsAllReducesAndTheirWaits) {
  std::string bytes = cudaAllReduceBundleBytes();
  Status status = readBytes(bytes);
  EXPECT_TRUE(status.ok()) << status.message();
  // Bytes next to an all-reduce's, in the same arena, are free to use while
  // it runs; its own bytes after its wait; a request waited for right away.
  status = readBytes(withManifest(bytes, [](bp::Manifest &m) {
    *launch(m, 0, 2).mutable_buffers(2) = arenaBytes(80, 16);
    *launch(m, 0, 5).mutable_buffers(1) = arenaBytes(48, 16);
    bp::Program &p = program(m, 0);
    *p.add_commands()->mutable_all_reduce_mean() = allReduce(m, 1);
    p.mutable_commands(7)->mutable_all_reduce_mean()->set_request(3);
    p.add_commands()->mutable_collective_wait()->set_request(3);
  }));
  EXPECT_TRUE(status.ok()) << status.message();
}

bp::ShardCollective &
appendShard(bp::Manifest &m, bp::ShardCollective::Kind kind, uint32_t request) {
  bp::Program &p = program(m, 0);
  bp::ShardCollective &shard = *p.add_commands()->mutable_shard();
  shard.set_kind(kind);
  shard.set_count(4);
  shard.set_ranks(2);
  shard.set_request(request);
  bool gathers = kind == bp::ShardCollective::ALL_GATHER;
  *shard.mutable_input() = arenaBytes(0, gathers ? 16 : 32);
  *shard.mutable_output() = arenaBytes(96, gathers ? 32 : 16);
  if (request != 0)
    p.add_commands()->mutable_collective_wait()->set_request(request);
  return shard;
}

TEST(BundleReader, AcceptsShardCollectives) {
  std::string bytes =
      withManifest(cudaAllReduceBundleBytes(), [](bp::Manifest &m) {
        appendShard(m, bp::ShardCollective::REDUCE_SCATTER_MEAN, 3);
        appendShard(m, bp::ShardCollective::LOCAL_SHARD, 0);
        appendShard(m, bp::ShardCollective::ALL_GATHER, 4);
      });
  Status status = readBytes(bytes);
  EXPECT_TRUE(status.ok()) << status.message();
}

TEST(BundleReader, RejectsEachBrokenCollectiveRule) {
  struct CollectiveCase {
    const char *name;
    std::function<void(bp::Manifest &)> change;
    std::string fragment;
  };
  const std::string at = "entry point 'mean_step': program 0 (target 'cuda')";
  const std::vector<CollectiveCase> cases = {
      {"all-reduce of f16",
       [](bp::Manifest &m) { allReduce(m, 1).set_element_type(bp::F16); },
       at + " command 1: all-reduce has element type 2 (f32 expected)"},
      {"all-reduce of no values",
       [](bp::Manifest &m) { allReduce(m, 1).set_count(0); },
       at + " command 1: all-reduce has count 0 (1 to 2^60 values)"},
      {"all-reduce count that does not match its buffer",
       [](bp::Manifest &m) { allReduce(m, 3).set_count(3); },
       at + " command 3: all-reduce of 3 f32 values has a buffer of 16 bytes, "
            "not 12"},
      {"all-reduce buffer outside the arena",
       [](bp::Manifest &m) {
         allReduce(m, 1).mutable_buffer()->set_offset(120);
       },
       at + " command 1: all-reduce buffer: bytes [120, +16) lie outside the "
            "128 bytes it refers to"},
      {"all-reduce of request 0",
       [](bp::Manifest &m) { allReduce(m, 1).set_request(0); },
       at + " command 1: all-reduce has request 0 (requests count from 1)"},
      {"all-reduce of a request still outstanding",
       [](bp::Manifest &m) { allReduce(m, 3).set_request(1); },
       at + " command 3: all-reduce starts request 1, which is already "
            "outstanding (command 1)"},
      {"request used twice",
       [](bp::Manifest &m) {
         bp::Program &p = program(m, 0);
         *p.add_commands()->mutable_all_reduce_mean() = allReduce(m, 1);
         p.add_commands()->mutable_collective_wait()->set_request(1);
       },
       at + " command 7: all-reduce starts request 1, which command 1 used "
            "already (requests are unique in a program)"},
      {"wait for a request never started",
       [](bp::Manifest &m) {
         bp::Command &wait = *program(m, 0).mutable_commands(4);
         wait.mutable_collective_wait()->set_request(5);
       },
       at + " command 4: waits for request 5, which is not outstanding"},
      {"second wait for a request",
       [](bp::Manifest &m) {
         program(m, 0).add_commands()->mutable_collective_wait()->set_request(
             1);
       },
       at + " command 7: waits for request 1, which is not outstanding"},
      {"request outstanding at the end",
       [](bp::Manifest &m) { program(m, 0).mutable_commands()->RemoveLast(); },
       at + ": request 2 (the all-reduce of command 3) is still outstanding "
            "at the end of the program"},
      {"launch writing an all-reduce's bytes",
       [](bp::Manifest &m) {
         *launch(m, 0, 2).mutable_buffers(2) = arenaBytes(76, 16);
       },
       at + " command 2: (kernel 'accumulate') buffer 2 touches the buffer of "
            "request 1 (the all-reduce of command 1), which is still "
            "outstanding"},
      {"launch reading a parameter before its all-reduce's wait",
       [](bp::Manifest &m) {
         bp::BufferRef &input = *launch(m, 0, 5).mutable_buffers(0);
         input.set_kind(bp::BufferRef::PARAM);
         input.set_offset(12);
         input.set_size(4);
       },
       at + " command 5: (kernel 'add_one') buffer 0 touches the buffer of "
            "request 2 (the all-reduce of command 3), which is still "
            "outstanding"},
      {"gemm writing an all-reduce's bytes",
       [](bp::Manifest &m) {
         bp::Gemm &gemm = *program(m, 0).mutable_commands(2)->mutable_gemm();
         gemm.set_a_type(bp::F32);
         gemm.set_b_type(bp::F32);
         gemm.set_c_type(bp::F32);
         gemm.set_m(1);
         gemm.set_n(1);
         gemm.set_k(4);
         gemm.set_lda(4);
         gemm.set_ldb(1);
         gemm.set_ldc(1);
         gemm.mutable_a()->set_kind(bp::BufferRef::INPUT);
         gemm.mutable_a()->set_size(16);
         gemm.mutable_b()->set_kind(bp::BufferRef::PARAM);
         gemm.mutable_b()->set_size(16);
         *gemm.mutable_c() = arenaBytes(68, 4);
       },
       at + " command 2: gemm matrix C touches the buffer of request 1 (the "
            "all-reduce of command 1), which is still outstanding"},
      {"all-reduce overlapping one in flight",
       [](bp::Manifest &m) {
         *allReduce(m, 3).mutable_buffer() = arenaBytes(72, 16);
       },
       at + " command 3: all-reduce buffer touches the buffer of request 1 "
            "(the all-reduce of command 1), which is still outstanding"},
      {"reduce-scatter sizes that do not match its count",
       [](bp::Manifest &m) {
         appendShard(m, bp::ShardCollective::REDUCE_SCATTER_MEAN, 3)
             .set_count(3);
       },
       at + " command 7: reduce-scatter of 3 f32 values per rank over 2 ranks "
            "has an input of 32 and an output of 16 bytes, not 24 and 12"},
      {"all-gather over 0 ranks",
       [](bp::Manifest &m) {
         appendShard(m, bp::ShardCollective::ALL_GATHER, 3).set_ranks(0);
       },
       at + " command 7: all-gather over 0 ranks (1 to 65536)"},
      {"reduce-scatter writing its own input",
       [](bp::Manifest &m) {
         *appendShard(m, bp::ShardCollective::REDUCE_SCATTER_MEAN, 3)
              .mutable_output() = arenaBytes(16, 16);
       },
       at + " command 7: reduce-scatter input and output overlap"},
      {"local shard with a request",
       [](bp::Manifest &m) {
         appendShard(m, bp::ShardCollective::LOCAL_SHARD, 0).set_request(5);
       },
       at + " command 7: local shard has request 5 (a copy in stream order "
            "has none: 0)"},
      {"reduce-scatter of no values",
       [](bp::Manifest &m) {
         appendShard(m, bp::ShardCollective::REDUCE_SCATTER_MEAN, 3)
             .set_count(0);
       },
       at + " command 7: reduce-scatter has count 0 (at least 1, and all "
            "ranks' values below 2^62 bytes)"},
      {"all-gather reusing a request",
       [](bp::Manifest &m) {
         appendShard(m, bp::ShardCollective::ALL_GATHER, 2);
       },
       at + " command 7: all-gather starts request 2, which command 3 used "
            "already (requests are unique in a program)"},
      {"local shard reading bytes an all-gather writes",
       [](bp::Manifest &m) {
         appendShard(m, bp::ShardCollective::ALL_GATHER, 3);
         bp::Program &p = program(m, 0);
         p.mutable_commands()->RemoveLast();
         bp::ShardCollective &copy =
             appendShard(m, bp::ShardCollective::LOCAL_SHARD, 0);
         copy.mutable_input()->set_offset(80);
         copy.mutable_output()->set_offset(64);
       },
       at + " command 8: local shard input touches the buffer of request 3 "
            "(the all-gather of command 7), which is still outstanding"},
      {"unknown shard collective",
       [](bp::Manifest &m) {
         appendShard(m, static_cast<bp::ShardCollective::Kind>(9), 3);
       },
       at + " command 7: shard collective has unknown kind 9"},
      {"launch reading a reduce-scatter's output before its wait",
       [](bp::Manifest &m) {
         appendShard(m, bp::ShardCollective::REDUCE_SCATTER_MEAN, 3);
         bp::Program &p = program(m, 0);
         p.mutable_commands()->RemoveLast();
         *p.add_commands() = p.commands(5);
         p.mutable_commands(8)->mutable_launch()->mutable_buffers(0)->CopyFrom(
             arenaBytes(96, 16));
         p.add_commands()->mutable_collective_wait()->set_request(3);
       },
       at + " command 8: (kernel 'add_one') buffer 0 touches the buffer of "
            "request 3 (the reduce-scatter of command 7), which is still "
            "outstanding"},
  };
  std::string bytes = cudaAllReduceBundleBytes();
  for (const CollectiveCase &test : cases) {
    SCOPED_TRACE(test.name);
    Status status = readBytes(withManifest(bytes, test.change));
    expectError(status, StatusCode::FormatError, test.fragment);
  }
}

TEST(BundleReader, AcceptsWhatTheRulesAllow) {
  Parts parts = multiBundleParts();
  // An arena alignment of 0 means the default, 64; a scalar is rank 0; an
  // empty tensor is fine; so is a parameter-free bundle without weights.
  parts.manifest.mutable_entry_points(1)->set_arena_alignment(0);
  parts.manifest.mutable_entry_points(0)->add_outputs()->set_name("scalar");
  parts.manifest.mutable_entry_points(0)->mutable_outputs(1)->set_element_type(
      bp::F64);
  bp::TensorSpec *empty = parts.manifest.mutable_entry_points(0)->add_inputs();
  empty->set_name("empty");
  empty->set_element_type(bp::I8);
  empty->add_shape(0);
  // Metadata in any order, with empty values.
  bp::MetadataEntry *entry = parts.manifest.add_metadata();
  entry->set_key("z");
  entry = parts.manifest.add_metadata();
  entry->set_key("a");
  entry->set_value("1");
  Status status = readBytes(encodeParts(parts));
  EXPECT_TRUE(status.ok()) << status.message();
}

} // namespace
