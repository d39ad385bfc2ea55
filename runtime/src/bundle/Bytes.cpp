//===- Bytes.cpp - aligned buffers ----------------------------------------===//

#include "kiln/runtime/Bytes.h"

#include <cstring>

namespace kiln::runtime {

Status AlignedBuffer::allocate(size_t size, AlignedBuffer &out,
                               size_t alignment) {
  out = AlignedBuffer();
  if (size == 0)
    return Status();
  void *memory = nullptr;
  if (posix_memalign(
          &memory, alignment < kTensorAlignment ? kTensorAlignment : alignment,
          size) != 0)
    return outOfMemory("cannot allocate ", size, " bytes");
  std::memset(memory, 0, size);
  out.storage.reset(static_cast<uint8_t *>(memory));
  out.length = size;
  return Status();
}

} // namespace kiln::runtime
