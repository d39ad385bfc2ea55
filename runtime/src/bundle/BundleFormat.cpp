//===- BundleFormat.cpp - the binary layout of a .kiln bundle -------------===//

#include "kiln/runtime/BundleFormat.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

namespace kiln::runtime {

const char *sectionKindName(uint32_t kind) {
  switch (static_cast<SectionKind>(kind)) {
  case SectionKind::Manifest:
    return "manifest";
  case SectionKind::Weights:
    return "weights";
  case SectionKind::CpuCode:
    return "cpu code";
  case SectionKind::CudaCubin:
    return "cuda cubin";
  case SectionKind::CudaPtx:
    return "cuda ptx";
  }
  return nullptr;
}

bool isCodeSection(uint32_t kind) {
  return kind == static_cast<uint32_t>(SectionKind::CpuCode) ||
         kind == static_cast<uint32_t>(SectionKind::CudaCubin) ||
         kind == static_cast<uint32_t>(SectionKind::CudaPtx);
}

uint32_t crc32(ByteSpan bytes) {
  // zlib takes at most 4 GiB per call.
  uLong crc = ::crc32(0L, Z_NULL, 0);
  const uint8_t *data = bytes.data;
  size_t left = bytes.size;
  while (left > 0) {
    uInt chunk = static_cast<uInt>(std::min<size_t>(left, 1u << 30));
    crc = ::crc32(crc, data, chunk);
    data += chunk;
    left -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

uint32_t loadLE32(const uint8_t *bytes) {
  return static_cast<uint32_t>(bytes[0]) |
         static_cast<uint32_t>(bytes[1]) << 8 |
         static_cast<uint32_t>(bytes[2]) << 16 |
         static_cast<uint32_t>(bytes[3]) << 24;
}

uint64_t loadLE64(const uint8_t *bytes) {
  return static_cast<uint64_t>(loadLE32(bytes)) |
         static_cast<uint64_t>(loadLE32(bytes + 4)) << 32;
}

void storeLE32(uint8_t *bytes, uint32_t value) {
  for (int i = 0; i < 4; ++i)
    bytes[i] = static_cast<uint8_t>(value >> (8 * i));
}

void storeLE64(uint8_t *bytes, uint64_t value) {
  storeLE32(bytes, static_cast<uint32_t>(value));
  storeLE32(bytes + 4, static_cast<uint32_t>(value >> 32));
}

uint64_t layoutSections(const std::vector<SectionContent> &sections,
                        std::vector<SectionEntry> &entries) {
  entries.clear();
  uint64_t offset =
      alignUp(kBundleHeaderSize + sections.size() * kSectionEntrySize,
              kSectionAlignment);
  uint64_t end = offset;
  for (const SectionContent &section : sections) {
    SectionEntry entry;
    entry.kind = static_cast<uint32_t>(section.kind);
    entry.offset = offset;
    entry.size = section.bytes.size;
    entry.crc = crc32(section.bytes);
    entry.name = section.name;
    entries.push_back(entry);
    end = offset + section.bytes.size;
    offset = alignUp(end, kSectionAlignment);
  }
  return end;
}

namespace {

void encodeEntry(const SectionEntry &entry, uint8_t *out) {
  std::memset(out, 0, kSectionEntrySize);
  storeLE32(out + entry_field::kKind, entry.kind);
  storeLE64(out + entry_field::kOffset, entry.offset);
  storeLE64(out + entry_field::kSize, entry.size);
  storeLE32(out + entry_field::kCrc, entry.crc);
  std::memcpy(out + entry_field::kName, entry.name.data(),
              std::min(entry.name.size(), kSectionNameSize - 1));
}

} // namespace

std::string encodeHeaderAndTable(const std::vector<SectionEntry> &entries,
                                 uint64_t fileSize) {
  std::string bytes(kBundleHeaderSize + entries.size() * kSectionEntrySize,
                    '\0');
  auto *data = reinterpret_cast<uint8_t *>(bytes.data());
  uint8_t *table = data + kBundleHeaderSize;
  for (size_t i = 0; i < entries.size(); ++i)
    encodeEntry(entries[i], table + i * kSectionEntrySize);

  std::memcpy(data + header_field::kMagic, kBundleMagic, sizeof(kBundleMagic));
  storeLE32(data + header_field::kVersion, kBundleFormatVersion);
  storeLE32(data + header_field::kSectionCount,
            static_cast<uint32_t>(entries.size()));
  storeLE64(data + header_field::kTableOffset, kBundleHeaderSize);
  storeLE64(data + header_field::kFileSize, fileSize);
  storeLE32(data + header_field::kTableCrc,
            crc32(ByteSpan(table, entries.size() * kSectionEntrySize)));
  storeLE32(data + header_field::kHeaderCrc,
            crc32(ByteSpan(data, header_field::kHeaderCrc)));
  return bytes;
}

std::string encodeBundle(const std::vector<SectionContent> &sections) {
  std::vector<SectionEntry> entries;
  uint64_t fileSize = layoutSections(sections, entries);
  std::string bytes = encodeHeaderAndTable(entries, fileSize);
  bytes.resize(fileSize, '\0');
  for (size_t i = 0; i < sections.size(); ++i) {
    if (sections[i].bytes.size > 0)
      std::memcpy(bytes.data() + entries[i].offset, sections[i].bytes.data,
                  sections[i].bytes.size);
  }
  return bytes;
}

} // namespace kiln::runtime
