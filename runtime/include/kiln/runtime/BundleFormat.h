//===- BundleFormat.h - the binary layout of a .kiln bundle -----*- C++ -*-===//
//
// Constants and encoders for the fixed parts of a bundle
// (docs/bundle-format.md): the 64-byte header, the section table and the
// placement of 64-byte-aligned sections. The reader decodes and validates the
// same layout.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_BUNDLEFORMAT_H
#define KILN_RUNTIME_BUNDLEFORMAT_H

#include "kiln/runtime/Bytes.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::runtime {

inline constexpr char kBundleMagic[8] = {'K', 'I', 'L', 'N',
                                         'B', 'N', 'D', 'L'};
inline constexpr uint32_t kBundleFormatVersion = 3;
inline constexpr uint64_t kBundleHeaderSize = 64;
inline constexpr uint64_t kSectionEntrySize = 64;
inline constexpr uint64_t kSectionAlignment = 64;
/// Names are NUL-padded to 32 bytes, so at most 31 characters.
inline constexpr size_t kSectionNameSize = 32;
/// Bounds the section table a reader accepts.
inline constexpr uint32_t kMaxSectionCount = 4096;

/// Byte offsets of the header fields.
namespace header_field {
inline constexpr size_t kMagic = 0;
inline constexpr size_t kVersion = 8;
inline constexpr size_t kSectionCount = 12;
inline constexpr size_t kTableOffset = 16;
inline constexpr size_t kFileSize = 24;
inline constexpr size_t kTableCrc = 32;
inline constexpr size_t kHeaderCrc = 36;
/// The header CRC covers bytes [0, kHeaderCrc).
inline constexpr size_t kReserved = 40;
} // namespace header_field

/// Byte offsets of the fields of one section table entry.
namespace entry_field {
inline constexpr size_t kKind = 0;
inline constexpr size_t kFlags = 4;
inline constexpr size_t kOffset = 8;
inline constexpr size_t kSize = 16;
inline constexpr size_t kCrc = 24;
inline constexpr size_t kReserved = 28;
inline constexpr size_t kName = 32;
} // namespace entry_field

enum class SectionKind : uint32_t {
  Manifest = 1,
  Weights = 2,
  /// An ELF shared object of the host's architecture.
  CpuCode = 3,
  /// A CUDA cubin (an ELF image for one GPU architecture).
  CudaCubin = 4,
  /// CUDA PTX text, which the driver compiles for the GPU at load time.
  CudaPtx = 5,
};

/// "manifest", "weights", "cpu code", "cuda cubin", "cuda ptx"; nullptr for a
/// kind this version does not know.
const char *sectionKindName(uint32_t kind);

/// Whether sections of `kind` hold a target's code.
bool isCodeSection(uint32_t kind);

/// One decoded section table entry.
struct SectionEntry {
  uint32_t kind = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint32_t crc = 0;
  std::string name;
};

/// What the writer puts into one section.
struct SectionContent {
  SectionKind kind;
  std::string name;
  ByteSpan bytes;
};

/// CRC-32 (the zlib/PNG polynomial) of `bytes`.
uint32_t crc32(ByteSpan bytes);

uint32_t loadLE32(const uint8_t *bytes);
uint64_t loadLE64(const uint8_t *bytes);
void storeLE32(uint8_t *bytes, uint32_t value);
void storeLE64(uint8_t *bytes, uint64_t value);

/// Rounds `value` up to a multiple of `alignment` (a power of two).
inline uint64_t alignUp(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) & ~(alignment - 1);
}

/// Places `sections` after the header and the table, each at a 64-byte
/// aligned offset, and describes them (offset, size, CRC) in `entries`.
/// Returns the size of the whole file.
uint64_t layoutSections(const std::vector<SectionContent> &sections,
                        std::vector<SectionEntry> &entries);

/// The bytes of the header and the section table for a laid-out file.
std::string encodeHeaderAndTable(const std::vector<SectionEntry> &entries,
                                 uint64_t fileSize);

/// A complete bundle file holding `sections`, with every checksum filled
/// in. Validates nothing: the writer checks the manifest first, and tests use
/// this to build deliberately broken bundles.
std::string encodeBundle(const std::vector<SectionContent> &sections);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_BUNDLEFORMAT_H
