//===- kiln-bundle-fuzzer.cpp - libFuzzer target of the bundle reader -----===//
//
// Feeds arbitrary bytes to the bundle reader. It must answer every input with
// a validated bundle or an error, never crash or read out of bounds. Each
// input is read twice: with checksums, as the runtime reads files, and
// without, so that mutations reach the table and manifest checks instead of
// stopping at a checksum mismatch.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/BundleReader.h"
#include "kiln/runtime/Manifest.h"

#include <cstddef>
#include <cstdint>
#include <memory>

using namespace kiln::runtime;

namespace {

/// Touches what a runtime would use of a bundle the reader accepted: every
/// section's bytes and every tensor's size, so bad offsets show up under
/// AddressSanitizer.
void useBundle(const BundleReader &reader) {
  volatile uint64_t sink = 0;
  for (uint32_t i = 0; i < reader.sections().size(); ++i) {
    ByteSpan bytes = reader.sectionBytes(i);
    if (bytes.size > 0)
      sink = sink + bytes.data[0] + bytes.data[bytes.size - 1];
  }
  for (const kiln::bundle::EntryPoint &entry : reader.manifest().entry_points())
    for (const kiln::bundle::TensorSpec &input : entry.inputs()) {
      uint64_t bytes = 0;
      if (tensorByteSize(input, bytes))
        sink = sink + bytes;
    }
}

void readOnce(const uint8_t *data, size_t size, bool verifyChecksums) {
  ReadOptions options;
  options.verifyChecksums = verifyChecksums;
  std::unique_ptr<BundleReader> reader;
  Status status = BundleReader::fromBuffer(ByteSpan(data, size), "fuzz.kiln",
                                           reader, options);
  if (status.ok())
    useBundle(*reader);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  readOnce(data, size, /*verifyChecksums=*/true);
  readOnce(data, size, /*verifyChecksums=*/false);
  return 0;
}
