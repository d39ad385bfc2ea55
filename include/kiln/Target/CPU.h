//===- CPU.h - compiling bufferized kiln modules for the CPU ----*- C++ -*-===//

#ifndef KILN_TARGET_CPU_H
#define KILN_TARGET_CPU_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace kiln {

struct CPUTargetOptions {
  /// Target CPU for code generation; "host" uses this machine's CPU and its
  /// features (AVX2, AVX-512...).
  std::string cpu = "host";
  /// LLVM optimization level, 0 to 3.
  unsigned optLevel = 3;
};

/// The compiled CPU code of a module.
struct CPUCode {
  std::string triple;
  std::string cpu;
  /// An ELF shared object exporting one `void kiln_<entry>(void **)` per
  /// entry function.
  std::string sharedObject;
  std::vector<std::string> kernels;
};

/// Symbol of the packed entry point of the function named `entry`.
std::string cpuKernelSymbol(llvm::StringRef entry);

/// Lowers a bufferized, memory-planned module (memref entry functions whose
/// arguments are raw buffers) to LLVM IR, optimizes it, emits an object and
/// links it into a shared object against OpenBLAS and libm.
llvm::Expected<CPUCode> compileForCPU(mlir::ModuleOp module,
                                      const CPUTargetOptions &options);

} // namespace kiln

#endif // KILN_TARGET_CPU_H
