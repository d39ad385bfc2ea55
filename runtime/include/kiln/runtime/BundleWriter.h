//===- BundleWriter.h - writing .kiln bundles -------------------*- C++ -*-===//
//
// What the compiler calls to produce a bundle: fill in the manifest (entry
// points, their command lists), add parameters with their initial values and
// targets with their code, then write. Writing checks the manifest exactly as
// the reader will and goes to a temporary file in the destination directory
// that is renamed into place, so a failed or interrupted write never leaves
// a half-written bundle.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_BUNDLEWRITER_H
#define KILN_RUNTIME_BUNDLEWRITER_H

#include "kiln/runtime/BundleFormat.h"
#include "kiln/runtime/Status.h"
#include "kiln/runtime/bundle.pb.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::runtime {

class BundleWriter {
public:
  BundleWriter();

  /// The manifest to write. Callers fill in the producer, the model name and
  /// the entry points; parameters and targets are added through
  /// addParameter and addTarget, which also set their section fields.
  bundle::Manifest &manifest() { return manifestProto; }
  const bundle::Manifest &manifest() const { return manifestProto; }

  /// Adds a parameter with its initial value (`size` bytes at `data`, copied
  /// into the weights section at a 64-byte aligned offset). Returns its index
  /// in manifest().parameters(), which is what BufferRef PARAM refers to.
  uint32_t addParameter(const bundle::TensorSpec &tensor, const void *data,
                        size_t size, bool trainable);

  /// Adds a parameter whose initial value the bundle does not store (`init`
  /// ZEROS or EXTERNAL), placed after the weights section when written.
  uint32_t addParameter(const bundle::TensorSpec &tensor,
                        bundle::Parameter::Init init, bool trainable);

  /// Adds `target` with its code (for the CPU an ELF shared object exporting
  /// target.kernels()); sets target.code_section. Returns its index in
  /// manifest().targets().
  uint32_t addTarget(const bundle::Target &target, std::string code,
                     SectionKind codeKind = SectionKind::CpuCode);

  /// One CUDA code image of a target: a cubin for `arch` ("sm_90a") or PTX
  /// for a virtual architecture ("compute_90a").
  struct Image {
    bundle::CodeImage::Format format;
    std::string arch;
    std::string bytes;
  };

  /// Adds a CUDA `target` with one section per image; sets target.images
  /// and target.code_section (the first image's section). Returns its index
  /// in manifest().targets().
  uint32_t addTarget(const bundle::Target &target, std::vector<Image> images);

  /// The whole bundle as bytes, after validating the manifest.
  Status serialize(std::string &out) const;

  /// Validates the manifest and writes the bundle to `path` through a
  /// temporary file in the same directory and a rename. Errors name `path`.
  Status write(const std::string &path) const;

private:
  struct CodeSection {
    SectionKind kind;
    std::string name;
    std::string bytes;
  };

  /// The sections in file order (manifest, weights, code), the serialized
  /// manifest they point into, and their layout; fails when the manifest is
  /// invalid.
  Status prepare(std::string &manifestBytes,
                 std::vector<SectionContent> &sections,
                 std::vector<SectionEntry> &entries, uint64_t &fileSize) const;

  /// The manifest as written: the unstored parameters moved past the end of
  /// the weights section and parameter_bytes set.
  bundle::Manifest finalManifest() const;

  bundle::Manifest manifestProto;
  std::string weights;
  /// Bytes of the unstored parameters, laid out from offset 0 until
  /// finalManifest places them.
  uint64_t unstoredBytes = 0;
  std::vector<CodeSection> codeSections;
};

} // namespace kiln::runtime

#endif // KILN_RUNTIME_BUNDLEWRITER_H
