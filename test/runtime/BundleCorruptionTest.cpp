//===- BundleCorruptionTest.cpp - damaged bundles are errors, not crashes -===//
//
// Truncates a valid bundle at every length and flips every bit of it, in the
// header, the table, the manifest, the weights and the code. With checksums
// every one must be refused with a format error (or, for the version field,
// an unsupported-version error); without them the reader must still never
// crash, whatever the damaged manifest says.
//
//===----------------------------------------------------------------------===//

#include "TestBundles.h"
#include "kiln/runtime/BundleReader.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <unistd.h>

using namespace kiln::runtime;
using namespace kiln::runtime::testing;

namespace {

std::string multiBundleBytes() {
  BundleWriter writer;
  buildMultiBundle(writer, standInCode());
  std::string bytes;
  EXPECT_TRUE(writer.serialize(bytes).ok());
  return bytes;
}

Status readBytes(const std::string &bytes, bool verifyChecksums = true) {
  ReadOptions options;
  options.verifyChecksums = verifyChecksums;
  std::unique_ptr<BundleReader> reader;
  return BundleReader::fromBuffer(ByteSpan(bytes), "damaged.kiln", reader,
                                  options);
}

bool isRefusal(const Status &status) {
  return status.code() == StatusCode::FormatError ||
         status.code() == StatusCode::Unsupported;
}

TEST(BundleCorruption, EveryTruncationIsAnError) {
  std::string bytes = multiBundleBytes();
  ASSERT_TRUE(readBytes(bytes).ok());
  for (size_t length = 0; length < bytes.size(); ++length) {
    Status status = readBytes(bytes.substr(0, length));
    ASSERT_TRUE(isRefusal(status))
        << "length " << length << ": " << status.message();
    ASSERT_FALSE(status.message().empty());
  }
}

TEST(BundleCorruption, EveryBitFlipIsAnError) {
  std::string bytes = multiBundleBytes();
  for (size_t offset = 0; offset < bytes.size(); ++offset) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string damaged = bytes;
      damaged[offset] = static_cast<char>(damaged[offset] ^ (1 << bit));
      Status status = readBytes(damaged);
      ASSERT_TRUE(isRefusal(status))
          << "bit " << bit << " of byte " << offset << " flipped: accepted";
    }
  }
}

TEST(BundleCorruption, WithoutChecksumsDamageNeverCrashes) {
  std::string bytes = multiBundleBytes();
  size_t accepted = 0, refused = 0;
  for (size_t offset = 0; offset < bytes.size(); ++offset) {
    for (uint8_t pattern : {0x01, 0x80, 0xff}) {
      std::string damaged = bytes;
      damaged[offset] = static_cast<char>(damaged[offset] ^ pattern);
      Status status = readBytes(damaged, /*verifyChecksums=*/false);
      (status.ok() ? accepted : refused) += 1;
      if (!status.ok())
        ASSERT_TRUE(isRefusal(status)) << status.message();
    }
  }
  // Damage to weights and code passes, damage to structure does not.
  EXPECT_GT(accepted, 0u);
  EXPECT_GT(refused, 0u);
}

TEST(BundleCorruption, DamagedFilesAreErrorsThroughTheMappedPath) {
  std::string bytes = multiBundleBytes();
  const char *base = std::getenv("TMPDIR");
  std::string path = std::string(base && *base ? base : "/tmp") +
                     "/kiln-damaged-" + std::to_string(getpid()) + ".kiln";
  for (size_t length : {size_t(1), size_t(63), size_t(64), size_t(300),
                        bytes.size() / 2, bytes.size() - 1}) {
    {
      std::ofstream file(path, std::ios::binary | std::ios::trunc);
      file << bytes.substr(0, length);
    }
    std::unique_ptr<BundleReader> reader;
    Status status = BundleReader::open(path, reader);
    EXPECT_EQ(static_cast<int>(status.code()),
              static_cast<int>(StatusCode::FormatError))
        << "length " << length;
    EXPECT_EQ(status.message().rfind(path + ": ", 0), 0u) << status.message();
  }
  unlink(path.c_str());
}

} // namespace
