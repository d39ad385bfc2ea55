//===- BundleReader.h - opening and validating .kiln bundles ----*- C++ -*-===//
//
// A BundleReader is an opened bundle whose every byte has been checked
// (docs/bundle-format.md): magic, version, file size, the table's bounds and
// alignment, the CRC-32 of the header, the table and each section, and the
// manifest with every index, offset and size in it. After that the manifest
// and sections can be used without further checks. A file is mapped
// read-only, so weights are used in place.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_BUNDLEREADER_H
#define KILN_RUNTIME_BUNDLEREADER_H

#include "kiln/runtime/BundleFormat.h"
#include "kiln/runtime/Status.h"
#include "kiln/runtime/bundle.pb.h"

#include <memory>
#include <string>
#include <vector>

namespace kiln::runtime {

class MappedFile;

struct ReadOptions {
  /// Off only where checksums would hide what a test wants to reach (the
  /// fuzzer uses it to get past them into the manifest checks).
  bool verifyChecksums = true;
};

class BundleReader {
public:
  ~BundleReader();
  BundleReader(const BundleReader &) = delete;
  BundleReader &operator=(const BundleReader &) = delete;

  /// Maps the file at `path` and validates it. Errors name the file.
  static Status open(const std::string &path,
                     std::unique_ptr<BundleReader> &out,
                     const ReadOptions &options = {});

  /// Validates `bytes`, which must outlive the reader; `name` stands for the
  /// file in messages.
  static Status fromBuffer(ByteSpan bytes, const std::string &name,
                           std::unique_ptr<BundleReader> &out,
                           const ReadOptions &options = {});

  /// The path, or the name given to fromBuffer.
  const std::string &name() const { return displayName; }
  const bundle::Manifest &manifest() const { return manifestProto; }
  const std::vector<SectionEntry> &sections() const { return table; }
  /// The bytes of section `index` (a valid index).
  ByteSpan sectionBytes(uint32_t index) const;
  /// The mapped file's descriptor, or -1 for a buffer. A session maps the
  /// weights from it copy-on-write.
  int fileDescriptor() const;

  /// The index of the entry point, parameter or target called `name`, or -1.
  int findEntryPoint(const std::string &name) const;
  int findParameter(const std::string &name) const;
  int findTarget(const std::string &name) const;

private:
  BundleReader() = default;
  Status parse(const ReadOptions &options);
  Status parseHeader(const ReadOptions &options, uint32_t &sectionCount,
                     uint64_t &tableOffset);
  Status parseTable(const ReadOptions &options, uint32_t sectionCount,
                    uint64_t tableOffset);
  Status parseSectionEntry(const ReadOptions &options, uint32_t index,
                           const uint8_t *entry);
  /// The header, the table and the sections must not overlap; the bytes
  /// between them must be zero.
  Status checkLayout(uint64_t tableOffset) const;
  Status checkPadding(uint64_t begin, uint64_t end) const;
  Status parseManifest();

  std::unique_ptr<MappedFile> file;
  ByteSpan bytes;
  std::string displayName;
  std::vector<SectionEntry> table;
  bundle::Manifest manifestProto;
};

} // namespace kiln::runtime

#endif // KILN_RUNTIME_BUNDLEREADER_H
