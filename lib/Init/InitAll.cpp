//===- InitAll.cpp - registration of every dialect and pass ---------------===//

#include "kiln/InitAll.h"

#include "kiln/KilnDialect.h"
#include "kiln/Transforms/Attention.h"
#include "kiln/Transforms/Collectives.h"
#include "kiln/Transforms/LayerNorm.h"
#include "kiln/Transforms/Passes.h"
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
}
