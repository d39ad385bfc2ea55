//===- BundleWriter.cpp - writing .kiln bundles ---------------------------===//

#include "kiln/runtime/BundleWriter.h"

#include "kiln/runtime/Manifest.h"

#include "bundle/MappedFile.h"
#include <atomic>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace kiln::runtime {

namespace bp = kiln::bundle;

namespace {

/// The writer's section order: the manifest, the weights, then one code
/// section per target in the order they were added.
constexpr uint32_t kWeightsSectionIndex = 1;
constexpr uint32_t kFirstCodeSectionIndex = 2;

/// "code.<target>", cut to fit the 31 characters a section name may have.
std::string codeSectionName(const std::string &target) {
  return ("code." + target).substr(0, kSectionNameSize - 1);
}

/// Writes the laid-out file: header and table, then each section at its
/// offset with zero padding in between.
Status writeLayout(int fd, const std::vector<SectionContent> &sections,
                   const std::vector<SectionEntry> &entries, uint64_t fileSize,
                   const std::string &path) {
  std::string head = encodeHeaderAndTable(entries, fileSize);
  KILN_RETURN_IF_ERROR(writeAll(fd, ByteSpan(head), path));
  uint64_t position = head.size();
  static const uint8_t zeros[kSectionAlignment] = {};
  for (size_t i = 0; i < sections.size(); ++i) {
    KILN_RETURN_IF_ERROR(
        writeAll(fd, ByteSpan(zeros, entries[i].offset - position), path));
    KILN_RETURN_IF_ERROR(writeAll(fd, sections[i].bytes, path));
    position = entries[i].offset + entries[i].size;
  }
  return Status();
}

/// Creates a new file next to `path` that no one else uses; the umask
/// applies to its mode as to any new file.
Status createTemporary(const std::string &path, std::string &tempPath,
                       int &fd) {
  static std::atomic<unsigned> counter{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    tempPath = strCat(path, ".tmp.", getpid(), ".", counter++);
    fd =
        ::open(tempPath.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0)
      return Status();
    if (errno != EEXIST)
      break;
  }
  return ioError(path, ": cannot create a temporary file next to it: ",
                 std::strerror(errno));
}

} // namespace

BundleWriter::BundleWriter() {
  manifestProto.set_weights_section(kWeightsSectionIndex);
}

uint32_t BundleWriter::addParameter(const bp::TensorSpec &tensor,
                                    const void *data, size_t size,
                                    bool trainable) {
  weights.resize(alignUp(weights.size(), kSectionAlignment), '\0');
  bp::Parameter *parameter = manifestProto.add_parameters();
  *parameter->mutable_tensor() = tensor;
  parameter->set_weights_offset(weights.size());
  parameter->set_size_bytes(size);
  parameter->set_trainable(trainable);
  weights.append(static_cast<const char *>(data), size);
  return static_cast<uint32_t>(manifestProto.parameters_size() - 1);
}

uint32_t BundleWriter::addParameter(const bp::TensorSpec &tensor,
                                    bp::Parameter::Init init, bool trainable) {
  uint64_t size = 0;
  tensorByteSize(tensor, size);
  unstoredBytes = alignUp(unstoredBytes, kSectionAlignment);
  bp::Parameter *parameter = manifestProto.add_parameters();
  *parameter->mutable_tensor() = tensor;
  parameter->set_weights_offset(unstoredBytes);
  parameter->set_size_bytes(size);
  parameter->set_trainable(trainable);
  parameter->set_init(init);
  unstoredBytes += size;
  return static_cast<uint32_t>(manifestProto.parameters_size() - 1);
}

bp::Manifest BundleWriter::finalManifest() const {
  bp::Manifest manifest = manifestProto;
  if (unstoredBytes == 0)
    return manifest;
  uint64_t base = alignUp(weights.size(), kSectionAlignment);
  for (bp::Parameter &parameter : *manifest.mutable_parameters())
    if (parameter.init() != bp::Parameter::WEIGHTS)
      parameter.set_weights_offset(base + parameter.weights_offset());
  manifest.set_parameter_bytes(base + unstoredBytes);
  return manifest;
}

uint32_t BundleWriter::addTarget(const bp::Target &target, std::string code,
                                 SectionKind codeKind) {
  bp::Target *added = manifestProto.add_targets();
  *added = target;
  added->set_code_section(kFirstCodeSectionIndex +
                          static_cast<uint32_t>(codeSections.size()));
  codeSections.push_back(
      {codeKind, codeSectionName(target.name()), std::move(code)});
  return static_cast<uint32_t>(manifestProto.targets_size() - 1);
}

uint32_t BundleWriter::addTarget(const bp::Target &target,
                                 std::vector<Image> images) {
  bp::Target *added = manifestProto.add_targets();
  *added = target;
  added->clear_images();
  uint32_t first =
      kFirstCodeSectionIndex + static_cast<uint32_t>(codeSections.size());
  added->set_code_section(first);
  for (Image &image : images) {
    bp::CodeImage *entry = added->add_images();
    entry->set_format(image.format);
    entry->set_arch(image.arch);
    entry->set_section(kFirstCodeSectionIndex +
                       static_cast<uint32_t>(codeSections.size()));
    bool cubin = image.format == bp::CodeImage::CUBIN;
    codeSections.push_back(
        {cubin ? SectionKind::CudaCubin : SectionKind::CudaPtx,
         codeSectionName(target.name() + "." + image.arch),
         std::move(image.bytes)});
  }
  return static_cast<uint32_t>(manifestProto.targets_size() - 1);
}

Status BundleWriter::prepare(std::string &manifestBytes,
                             std::vector<SectionContent> &sections,
                             std::vector<SectionEntry> &entries,
                             uint64_t &fileSize) const {
  bp::Manifest manifest = finalManifest();
  if (!manifest.SerializeToString(&manifestBytes))
    return internalError("cannot serialize the manifest");
  sections.clear();
  sections.push_back(
      {SectionKind::Manifest, "manifest", ByteSpan(manifestBytes)});
  sections.push_back({SectionKind::Weights, "weights", ByteSpan(weights)});
  for (const CodeSection &code : codeSections)
    sections.push_back({code.kind, code.name, ByteSpan(code.bytes)});
  fileSize = layoutSections(sections, entries);
  return validateManifest(manifest, entries)
      .withContext("invalid bundle manifest");
}

Status BundleWriter::serialize(std::string &out) const {
  std::string manifestBytes;
  std::vector<SectionContent> sections;
  std::vector<SectionEntry> entries;
  uint64_t fileSize = 0;
  KILN_RETURN_IF_ERROR(prepare(manifestBytes, sections, entries, fileSize));
  out = encodeBundle(sections);
  return Status();
}

Status BundleWriter::write(const std::string &path) const {
  std::string manifestBytes;
  std::vector<SectionContent> sections;
  std::vector<SectionEntry> entries;
  uint64_t fileSize = 0;
  KILN_RETURN_IF_ERROR(
      prepare(manifestBytes, sections, entries, fileSize).withContext(path));

  std::string tempPath;
  int fd = -1;
  KILN_RETURN_IF_ERROR(createTemporary(path, tempPath, fd));
  Status status = writeLayout(fd, sections, entries, fileSize, tempPath);
  if (status.ok() && fsync(fd) != 0)
    status = ioError(tempPath, ": cannot flush: ", std::strerror(errno));
  if (close(fd) != 0 && status.ok())
    status = ioError(tempPath, ": cannot close: ", std::strerror(errno));
  if (status.ok() && std::rename(tempPath.c_str(), path.c_str()) != 0)
    status = ioError(path, ": cannot rename ", tempPath,
                     " into place: ", std::strerror(errno));
  if (!status.ok())
    ::unlink(tempPath.c_str());
  return status;
}

} // namespace kiln::runtime
