//===- BundleReader.cpp - opening and validating .kiln bundles ------------===//

#include "kiln/runtime/BundleReader.h"

#include "bundle/MappedFile.h"
#include "kiln/runtime/Manifest.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <iomanip>
#include <utility>

namespace kiln::runtime {

namespace {

std::string hex32(uint32_t value) {
  std::ostringstream stream;
  stream << "0x" << std::hex << std::setw(8) << std::setfill('0') << value;
  return stream.str();
}

bool allZero(const uint8_t *bytes, size_t size) {
  return std::all_of(bytes, bytes + size, [](uint8_t b) { return b == 0; });
}

/// Decodes a NUL-padded name field; false when bytes follow the first NUL or
/// no NUL terminates it.
bool decodeName(const uint8_t *field, std::string &name) {
  const uint8_t *end = field + kSectionNameSize;
  const uint8_t *nul = std::find(field, end, 0);
  if (nul == end || !allZero(nul, static_cast<size_t>(end - nul)))
    return false;
  name.assign(reinterpret_cast<const char *>(field),
              static_cast<size_t>(nul - field));
  return true;
}

Status checkCrc(const char *what, uint32_t stored, ByteSpan bytes) {
  uint32_t computed = crc32(bytes);
  if (stored != computed)
    return formatError(what, " checksum mismatch (stored ", hex32(stored),
                       ", computed ", hex32(computed), ")");
  return Status();
}

} // namespace

BundleReader::~BundleReader() = default;

Status BundleReader::open(const std::string &path,
                          std::unique_ptr<BundleReader> &out,
                          const ReadOptions &options) {
  std::unique_ptr<MappedFile> file;
  KILN_RETURN_IF_ERROR(MappedFile::open(path, file));
  std::unique_ptr<BundleReader> reader(new BundleReader());
  reader->bytes = file->bytes();
  reader->file = std::move(file);
  reader->displayName = path;
  KILN_RETURN_IF_ERROR(reader->parse(options).withContext(path));
  // Checking the checksums read every byte; what the session needs later
  // (the manifest, the code, the weights through their own mapping) is read
  // again on demand instead of staying resident for the whole run.
  reader->file->releaseResidentPages();
  out = std::move(reader);
  return Status();
}

Status BundleReader::fromBuffer(ByteSpan bytes, const std::string &name,
                                std::unique_ptr<BundleReader> &out,
                                const ReadOptions &options) {
  std::unique_ptr<BundleReader> reader(new BundleReader());
  reader->bytes = bytes;
  reader->displayName = name;
  KILN_RETURN_IF_ERROR(reader->parse(options).withContext(name));
  out = std::move(reader);
  return Status();
}

ByteSpan BundleReader::sectionBytes(uint32_t index) const {
  const SectionEntry &entry = table[index];
  return bytes.slice(entry.offset, entry.size);
}

int BundleReader::fileDescriptor() const {
  return file ? file->fileDescriptor() : -1;
}

int BundleReader::findEntryPoint(const std::string &name) const {
  for (int i = 0; i < manifestProto.entry_points_size(); ++i)
    if (manifestProto.entry_points(i).name() == name)
      return i;
  return -1;
}

int BundleReader::findParameter(const std::string &name) const {
  for (int i = 0; i < manifestProto.parameters_size(); ++i)
    if (manifestProto.parameters(i).tensor().name() == name)
      return i;
  return -1;
}

int BundleReader::findTarget(const std::string &name) const {
  for (int i = 0; i < manifestProto.targets_size(); ++i)
    if (manifestProto.targets(i).name() == name)
      return i;
  return -1;
}

Status BundleReader::parse(const ReadOptions &options) {
  uint32_t sectionCount = 0;
  uint64_t tableOffset = 0;
  KILN_RETURN_IF_ERROR(parseHeader(options, sectionCount, tableOffset));
  KILN_RETURN_IF_ERROR(parseTable(options, sectionCount, tableOffset));
  KILN_RETURN_IF_ERROR(checkLayout(tableOffset));
  return parseManifest();
}

Status BundleReader::parseHeader(const ReadOptions &options,
                                 uint32_t &sectionCount,
                                 uint64_t &tableOffset) {
  using namespace header_field;
  if (bytes.size < kBundleHeaderSize)
    return formatError("the file is ", bytes.size,
                       " bytes, shorter than the 64-byte bundle header");
  const uint8_t *header = bytes.data;
  if (std::memcmp(header + kMagic, kBundleMagic, sizeof(kBundleMagic)) != 0)
    return formatError("not a Kiln bundle (bad magic at offset 0)");
  uint32_t version = loadLE32(header + kVersion);
  if (version != kBundleFormatVersion)
    return Status(StatusCode::Unsupported,
                  strCat("bundle format version ", version,
                         "; this runtime reads version ",
                         kBundleFormatVersion));
  if (options.verifyChecksums)
    KILN_RETURN_IF_ERROR(checkCrc("header", loadLE32(header + kHeaderCrc),
                                  ByteSpan(header, kHeaderCrc)));
  if (!allZero(header + kReserved, kBundleHeaderSize - kReserved))
    return formatError("reserved header bytes 40..63 are not zero");
  uint64_t fileSize = loadLE64(header + kFileSize);
  if (fileSize != bytes.size)
    return formatError("the header records a file size of ", fileSize,
                       " bytes but the file has ", bytes.size,
                       " (truncated or extended)");
  sectionCount = loadLE32(header + kSectionCount);
  tableOffset = loadLE64(header + kTableOffset);
  if (sectionCount == 0 || sectionCount > kMaxSectionCount)
    return formatError("section count ", sectionCount, " is not in 1..",
                       kMaxSectionCount);
  uint64_t tableSize = uint64_t(sectionCount) * kSectionEntrySize;
  if (tableOffset % kSectionAlignment != 0 || tableOffset < kBundleHeaderSize ||
      tableOffset > bytes.size || tableSize > bytes.size - tableOffset)
    return formatError(
        "the section table (", sectionCount, " entries at offset ", tableOffset,
        ") is misaligned or lies outside the ", bytes.size, "-byte file");
  if (options.verifyChecksums)
    KILN_RETURN_IF_ERROR(checkCrc("section table", loadLE32(header + kTableCrc),
                                  bytes.slice(tableOffset, tableSize)));
  return Status();
}

Status BundleReader::parseTable(const ReadOptions &options,
                                uint32_t sectionCount, uint64_t tableOffset) {
  table.clear();
  table.reserve(sectionCount);
  for (uint32_t i = 0; i < sectionCount; ++i) {
    const uint8_t *entry = bytes.data + tableOffset + i * kSectionEntrySize;
    KILN_RETURN_IF_ERROR(parseSectionEntry(options, i, entry));
  }
  return Status();
}

Status BundleReader::parseSectionEntry(const ReadOptions &options,
                                       uint32_t index, const uint8_t *entry) {
  using namespace entry_field;
  SectionEntry section;
  section.kind = loadLE32(entry + kKind);
  section.offset = loadLE64(entry + kOffset);
  section.size = loadLE64(entry + kSize);
  section.crc = loadLE32(entry + kCrc);
  std::string what = strCat("section ", index);
  if (!decodeName(entry + kName, section.name))
    return formatError(what, ": the name is not NUL-padded");
  what += strCat(" '", section.name, "'");
  if (!sectionKindName(section.kind))
    return formatError(what, " has unknown kind ", section.kind);
  if (loadLE32(entry + kFlags) != 0 || loadLE32(entry + kReserved) != 0)
    return formatError(what, ": flags and reserved bytes are not zero");
  if (section.offset % kSectionAlignment != 0)
    return formatError(what, ": offset ", section.offset,
                       " is not a multiple of 64");
  if (section.offset > bytes.size || section.size > bytes.size - section.offset)
    return formatError(what, ": bytes [", section.offset, ", +", section.size,
                       ") lie outside the ", bytes.size, "-byte file");
  if (options.verifyChecksums)
    KILN_RETURN_IF_ERROR(
        checkCrc("data", section.crc, bytes.slice(section.offset, section.size))
            .withContext(strCat(what, " at offset ", section.offset)));
  table.push_back(section);
  return Status();
}

Status BundleReader::checkLayout(uint64_t tableOffset) const {
  // Every non-empty region: the header, the table and each section.
  struct Region {
    uint64_t begin, end;
    std::string name;
  };
  std::vector<Region> regions;
  regions.push_back({0, kBundleHeaderSize, "the header"});
  regions.push_back({tableOffset,
                     tableOffset + table.size() * kSectionEntrySize,
                     "the section table"});
  for (size_t i = 0; i < table.size(); ++i)
    if (table[i].size > 0)
      regions.push_back({table[i].offset, table[i].offset + table[i].size,
                         strCat("section ", i, " '", table[i].name, "'")});
  std::sort(regions.begin(), regions.end(),
            [](const Region &a, const Region &b) { return a.begin < b.begin; });
  // Bytes between regions are padding and must be zero, so that no byte of
  // the file escapes validation.
  uint64_t covered = 0;
  for (size_t i = 0; i < regions.size(); ++i) {
    if (regions[i].begin < covered)
      return formatError(regions[i].name, " at offset ", regions[i].begin,
                         " overlaps ", regions[i - 1].name);
    KILN_RETURN_IF_ERROR(checkPadding(covered, regions[i].begin));
    covered = regions[i].end;
  }
  return checkPadding(covered, bytes.size);
}

Status BundleReader::checkPadding(uint64_t begin, uint64_t end) const {
  for (uint64_t offset = begin; offset < end; ++offset)
    if (bytes.data[offset] != 0)
      return formatError("byte ", offset,
                         " lies outside every section and is not zero "
                         "padding");
  return Status();
}

Status BundleReader::parseManifest() {
  int manifestIndex = -1;
  for (size_t i = 0; i < table.size(); ++i) {
    if (table[i].kind != static_cast<uint32_t>(SectionKind::Manifest))
      continue;
    if (manifestIndex >= 0)
      return formatError("sections ", manifestIndex, " and ", i,
                         " are both manifests");
    manifestIndex = static_cast<int>(i);
  }
  if (manifestIndex < 0)
    return formatError("no manifest section");
  ByteSpan manifestBytes = sectionBytes(static_cast<uint32_t>(manifestIndex));
  if (manifestBytes.size > static_cast<size_t>(INT_MAX) ||
      !manifestProto.ParseFromArray(manifestBytes.data,
                                    static_cast<int>(manifestBytes.size)))
    return formatError("section ", manifestIndex, " at offset ",
                       table[manifestIndex].offset,
                       ": the manifest is not a valid kiln.bundle.Manifest");
  return validateManifest(manifestProto, table).withContext("manifest");
}

} // namespace kiln::runtime
