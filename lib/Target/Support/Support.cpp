//===- Support.cpp - what the compile pipeline and targets share ----------===//

#include "kiln/Target/Support.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"

#include <unistd.h>

using namespace mlir;
using llvm::Expected;

llvm::Error kiln::makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

int64_t kiln::tensorBytes(ShapedType type) {
  Type element = type.getElementType();
  int64_t bits = element.isInteger(1) ? 8 : element.getIntOrFloatBitWidth();
  return type.getNumElements() * ((bits + 7) / 8);
}

llvm::Error kiln::runPasses(PassManager &pm, ModuleOp module, StringRef what) {
  std::string diagnostics;
  ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &diag) {
    if (diagnostics.empty() &&
        diag.getSeverity() == DiagnosticSeverity::Error) {
      llvm::raw_string_ostream os(diagnostics);
      diag.getLocation().print(os);
      os << ": " << diag.str();
    }
    return success();
  });
  if (failed(pm.run(module)))
    return makeError(what + " failed: " + diagnostics);
  return llvm::Error::success();
}

Expected<std::string> kiln::runToolOnBytes(
    StringRef input, StringRef inputSuffix, StringRef outputSuffix,
    StringRef program,
    function_ref<std::vector<std::string>(StringRef, StringRef)> arguments,
    StringRef what) {
  SmallString<128> inputPath, outputPath;
  int fd;
  if (llvm::sys::fs::createTemporaryFile("kiln", inputSuffix, fd, inputPath))
    return makeError("cannot create a temporary file");
  {
    llvm::raw_fd_ostream out(fd, /*shouldClose=*/true);
    out << input;
  }
  if (llvm::sys::fs::createTemporaryFile("kiln", outputSuffix, fd,
                                         outputPath)) {
    llvm::sys::fs::remove(inputPath);
    return makeError("cannot create a temporary file");
  }
  ::close(fd);
  std::vector<std::string> args = arguments(inputPath, outputPath);
  SmallVector<StringRef> argRefs(args.begin(), args.end());
  llvm::Error ran = runTool(program, argRefs, what);
  llvm::sys::fs::remove(inputPath);
  if (ran) {
    llvm::sys::fs::remove(outputPath);
    return std::move(ran);
  }
  auto output = llvm::MemoryBuffer::getFile(outputPath, /*IsText=*/false);
  llvm::sys::fs::remove(outputPath);
  if (!output)
    return makeError("cannot read what " + program + " wrote (" + what + ")");
  return (*output)->getBuffer().str();
}

llvm::Error kiln::runTool(StringRef program, ArrayRef<StringRef> args,
                          StringRef what) {
  SmallString<128> log;
  int fd;
  if (llvm::sys::fs::createTemporaryFile("kiln-tool", "log", fd, log))
    return makeError("cannot create a temporary file");
  ::close(fd);
  std::optional<StringRef> redirects[] = {std::nullopt, log.str(), log.str()};
  std::string message;
  int status = llvm::sys::ExecuteAndWait(program, args, std::nullopt, redirects,
                                         0, 0, &message);
  auto output = llvm::MemoryBuffer::getFile(log);
  llvm::sys::fs::remove(log);
  if (status != 0)
    return makeError(what + " with " + program + " failed" +
                     (message.empty() ? "" : ": " + message) + "\n" +
                     (output ? (*output)->getBuffer().str() : ""));
  return llvm::Error::success();
}
