//===- Bytes.h - byte spans and aligned buffers -----------------*- C++ -*-===//
//
// A non-owning view of bytes (C++17 has no std::span) and an owning buffer
// whose storage is 64-byte aligned, as tensors handed to compiled kernels
// should be.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_BYTES_H
#define KILN_RUNTIME_BYTES_H

#include "kiln/runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

namespace kiln::runtime {

/// A view of `size` bytes at `data`; it owns nothing.
struct ByteSpan {
  const uint8_t *data = nullptr;
  size_t size = 0;

  ByteSpan() = default;
  ByteSpan(const void *bytes, size_t length)
      : data(static_cast<const uint8_t *>(bytes)), size(length) {}
  explicit ByteSpan(const std::string &bytes)
      : ByteSpan(bytes.data(), bytes.size()) {}

  /// The `length` bytes at `offset`; the caller has checked the range.
  ByteSpan slice(uint64_t offset, uint64_t length) const {
    return ByteSpan(data + offset, length);
  }
};

/// Alignment of tensor storage the runtime allocates.
inline constexpr size_t kTensorAlignment = 64;

/// Heap storage aligned to `kTensorAlignment` (or more); movable, not
/// copyable. A zero-sized buffer holds no storage.
class AlignedBuffer {
public:
  AlignedBuffer() = default;

  /// Allocates `size` bytes aligned to `alignment` (a power of two, at least
  /// `kTensorAlignment`), zero-filled. Fails with OutOfMemory, never throws.
  static Status allocate(size_t size, AlignedBuffer &out,
                         size_t alignment = kTensorAlignment);

  uint8_t *data() { return storage.get(); }
  const uint8_t *data() const { return storage.get(); }
  size_t size() const { return length; }

private:
  struct FreeDeleter {
    void operator()(uint8_t *pointer) const { std::free(pointer); }
  };
  std::unique_ptr<uint8_t, FreeDeleter> storage;
  size_t length = 0;
};

} // namespace kiln::runtime

#endif // KILN_RUNTIME_BYTES_H
