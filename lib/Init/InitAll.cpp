//===- InitAll.cpp - registration of every dialect and pass ---------------===//

#include "kiln/InitAll.h"

#include "kiln/Conversion/Passes.h"
#include "kiln/KilnDialect.h"
#include "kiln/Target/CPU/Passes.h"
#include "kiln/Target/CUDA/LayerNorm.h"
#include "kiln/Target/CUDA/Passes.h"
#include "kiln/Transforms/Attention.h"
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Training/Collectives.h"
#include "kiln/Transforms/Training/Passes.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

void kiln::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<KilnDialect>();
  registerCollectivesBufferization(registry);
  registerFlashAttentionBufferization(registry);
  registerFusedLayerNormBufferization(registry);
  // The upstream dialects Kiln lowers through, with their interface models
  // (bufferization, inlining...) and LLVM IR translations.
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllToLLVMIRTranslations(registry);
}

void kiln::registerAllPasses() {
  mlir::registerAllPasses();
  registerKilnPasses();
  registerKilnTrainingPasses();
  registerKilnConversionPasses();
  registerKilnCPUPasses();
  registerKilnCUDAPasses();
}
