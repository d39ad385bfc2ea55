//===- ExternalizeParams.cpp - parameter reads to function arguments ------===//

#include "kiln/KilnOps.h"
#include "kiln/Transforms/Passes.h"

#include "llvm/ADT/MapVector.h"

namespace kiln {
#define GEN_PASS_DEF_KILNEXTERNALIZEPARAMS
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

struct KilnExternalizeParamsPass
    : kiln::impl::KilnExternalizeParamsBase<KilnExternalizeParamsPass> {
  void runOnOperation() override {
    for (auto function : getOperation().getOps<func::FuncOp>()) {
      if (function.isExternal())
        continue;
      // Parameter name -> its reads, in first-read order.
      llvm::MapVector<StringAttr, SmallVector<GetParamOp>> reads;
      function.walk([&](GetParamOp read) {
        reads[read.getNameAttr().getAttr()].push_back(read);
      });
      if (!reads.empty() &&
          !SymbolTable::symbolKnownUseEmpty(function, getOperation())) {
        function.emitError("kiln-externalize-params: '")
            << function.getName()
            << "' reads parameters and is called; only entry functions may "
               "read parameters";
        return signalPassFailure();
      }
      Block &entry = function.getBody().front();
      for (auto &[name, uses] : reads) {
        unsigned index = function.getNumArguments();
        Type type = uses.front().getType();
        if (failed(function.insertArgument(index, type, DictionaryAttr(),
                                           function.getLoc())))
          return signalPassFailure();
        function.setArgAttr(index, "kiln.param", name);
        for (GetParamOp read : uses) {
          read.replaceAllUsesWith(entry.getArgument(index));
          read.erase();
        }
      }
    }
  }
};

} // namespace
