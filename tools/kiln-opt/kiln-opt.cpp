//===- kiln-opt.cpp - the opt-style driver for Kiln's passes --------------===//
//
// Every Kiln and upstream pass, and the pipelines kilnc runs
// (kiln-train-pipeline, kiln-compile-pipeline): `kilnc --dump-pipeline`
// prints the kiln-opt command that reproduces a compile.
//
//===----------------------------------------------------------------------===//

#include "kiln/Compiler/Pipelines.h"
#include "kiln/InitAll.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  kiln::registerAllDialects(registry);
  kiln::registerAllPasses();
  kiln::registerPipelines();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Kiln pass driver\n", registry));
}
