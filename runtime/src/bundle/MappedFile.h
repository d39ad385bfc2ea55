//===- MappedFile.h - a file mapped read-only into memory -------*- C++ -*-===//

#ifndef KILN_RUNTIME_SRC_MAPPEDFILE_H
#define KILN_RUNTIME_SRC_MAPPEDFILE_H

#include "kiln/runtime/Bytes.h"
#include "kiln/runtime/Status.h"

#include <memory>
#include <string>

namespace kiln::runtime {

/// A regular file mapped read-only and private. The descriptor stays open so
/// parts of the file can be mapped again (copy-on-write weights).
class MappedFile {
public:
  ~MappedFile();
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;

  /// Maps the file at `path`; an empty file, a directory or an unreadable
  /// file is an error naming `path`.
  static Status open(const std::string &path, std::unique_ptr<MappedFile> &out);

  ByteSpan bytes() const { return ByteSpan(address, length); }
  int fileDescriptor() const { return fd; }

  /// Drops the pages read so far from this process's resident set; they
  /// stay valid and are read again from the file on the next access. The
  /// bundle reader reads the whole file once to check its checksums and
  /// then needs only the manifest and the code.
  void releaseResidentPages();

private:
  MappedFile() = default;

  int fd = -1;
  void *address = nullptr;
  size_t length = 0;
};

/// A writable, private (copy-on-write) mapping of `size` bytes of a file
/// starting at `offset`; pages are read from the file on first use and copied
/// on first write, so the file never changes.
class PrivateMapping {
public:
  PrivateMapping() = default;
  ~PrivateMapping();
  PrivateMapping(const PrivateMapping &) = delete;
  PrivateMapping &operator=(const PrivateMapping &) = delete;

  /// Maps [offset, offset + size) of the file `fd`; `what` names it in errors.
  Status map(int fd, uint64_t offset, uint64_t size, const std::string &what);

  uint8_t *data() const { return start; }

private:
  void *address = nullptr;
  size_t length = 0;
  uint8_t *start = nullptr;
};

/// Writes all of `bytes` to `fd`, retrying interrupted and short writes;
/// errors name `what`.
Status writeAll(int fd, ByteSpan bytes, const std::string &what);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_SRC_MAPPEDFILE_H
