//===- kiln-onnx-import-fuzzer.cpp - libFuzzer target of the importer -----===//
//
// Feeds arbitrary bytes to the ONNX importer as a serialized ModelProto. The
// importer must answer every input with a module or an error, never crash.
//
//===----------------------------------------------------------------------===//

#include "kiln/Import/ONNX.h"
#include "kiln/InitAll.h"

#include "mlir/IR/MLIRContext.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mlir::DialectRegistry registry;
  kiln::registerAllDialects(registry);
  // Threads would only slow down many tiny imports.
  mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
  kiln::ImportOptions options;
  options.batchSize = 2;
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  auto module =
      kiln::importONNXBuffer(context, bytes, "fuzz.onnx", "", options);
  if (!module)
    llvm::consumeError(module.takeError());
  return 0;
}
