//===- CpuCode.h - a target's ELF shared object, loaded ---------*- C++ -*-===//

#ifndef KILN_RUNTIME_SRC_CPUCODE_H
#define KILN_RUNTIME_SRC_CPUCODE_H

#include "kiln/runtime/Bytes.h"
#include "kiln/runtime/Status.h"

#include <memory>
#include <string>

namespace kiln::runtime {

/// The calling convention of every compiled kernel: one pointer per buffer
/// the command lists.
using KernelFunction = void (*)(void **buffers);

/// The CPU code of a bundle, loaded with the dynamic loader. Each instance is
/// a separate copy of the object, with its own global state.
class CpuCode {
public:
  ~CpuCode();
  CpuCode(const CpuCode &) = delete;
  CpuCode &operator=(const CpuCode &) = delete;

  /// Checks that `image` is an ELF shared object for this machine and loads
  /// it from an in-memory file (memfd_create), or from a private temporary
  /// file where that is not possible. `what` names it in errors.
  static Status load(ByteSpan image, const std::string &what,
                     std::unique_ptr<CpuCode> &out);

  /// The kernel exported as `symbol`; NotFound if the object lacks it.
  Status lookup(const std::string &symbol, KernelFunction &out) const;

private:
  CpuCode() = default;

  void *handle = nullptr;
  std::string name;
};

} // namespace kiln::runtime

#endif // KILN_RUNTIME_SRC_CPUCODE_H
