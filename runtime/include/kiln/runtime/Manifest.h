//===- Manifest.h - checking and describing a bundle's manifest -*- C++ -*-===//
//
// The manifest (runtime/schema/bundle.proto) names everything a bundle
// holds. validateManifest checks every rule of docs/bundle-format.md, so the
// reader trusts nothing it has not checked and the writer never produces a
// bundle the reader would refuse.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_MANIFEST_H
#define KILN_RUNTIME_MANIFEST_H

#include "kiln/runtime/BundleFormat.h"
#include "kiln/runtime/ElementType.h"
#include "kiln/runtime/Status.h"
#include "kiln/runtime/bundle.pb.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::runtime {

/// The largest rank a tensor may have.
inline constexpr int kMaxRank = 32;
/// The largest alignment an entry point may ask for its arena.
inline constexpr uint32_t kMaxArenaAlignment = 4096;

/// Bytes of a dense tensor of `spec`; false when a dimension is negative,
/// the type unknown or the size does not fit in 63 bits.
bool tensorByteSize(const bundle::TensorSpec &spec, uint64_t &bytes);

/// "f32[2,3]" ("f32[]" for a scalar).
std::string describeTensorType(int elementType, const int64_t *shape,
                               size_t rank);
std::string describeTensorType(const bundle::TensorSpec &spec);

/// The alignment the arena of `entry` needs (a stored 0 means 64).
uint32_t arenaAlignment(const bundle::EntryPoint &entry);

/// Checks every rule the manifest must satisfy against the file's sections:
/// names, types and shapes of tensors; parameters inside the weights section,
/// aligned, sized and disjoint; commands whose buffers lie inside what they
/// refer to and whose kernels every target lists; targets whose code section
/// exists and holds code. The message names the entry point, tensor,
/// parameter, command or target at fault.
Status validateManifest(const bundle::Manifest &manifest,
                        const std::vector<SectionEntry> &sections);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_MANIFEST_H
