//===- NpyStream.h - where .npy bytes are read from -------------*- C++ -*-===//

#ifndef KILN_RUNTIME_SRC_NPYSTREAM_H
#define KILN_RUNTIME_SRC_NPYSTREAM_H

#include "kiln/runtime/Npy.h"

#include <cstdio>
#include <initializer_list>
#include <string>

namespace kiln::runtime {

/// A source of exactly `remaining()` bytes: a file, or an archive entry.
class NpyStream {
public:
  virtual ~NpyStream() = default;
  /// Reads exactly `size` bytes; fewer is a truncation error.
  virtual Status read(void *data, size_t size) = 0;
  uint64_t remaining() const { return left; }

protected:
  uint64_t left = 0;
};

/// A whole .npy file.
class FileNpyStream : public NpyStream {
public:
  ~FileNpyStream() override;
  Status open(const std::string &path);
  Status read(void *data, size_t size) override;

private:
  std::FILE *file = nullptr;
};

/// Writes `parts` one after the other to a temporary file next to `path`
/// and renames it over `path`.
Status writeFileReplacing(const std::string &path,
                          std::initializer_list<ByteSpan> parts);

/// Reads one array: header, then exactly the data it announces.
Status readNpy(NpyStream &in, NpyArray &out);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_SRC_NPYSTREAM_H
