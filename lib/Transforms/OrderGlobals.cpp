//===- OrderGlobals.cpp - a deterministic order for bufferized constants --===//
//
// One-shot bufferization turns each constant tensor into a memref.global,
// named from its type and a counter, in the order it visits the functions,
// which follows pointers and changes from run to run: the same model gave
// bundles that differed in the order (and so the names) of their globals,
// and with that in the compiled code. This pass sorts the module's globals
// by what they are (their type, then their bytes) and names them in that
// order (equal ones merged), at the top of the module, so that equal
// inputs give equal bundles.
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/raw_ostream.h"

namespace kiln {
#define GEN_PASS_DEF_KILNORDERGLOBALS
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

/// What a global is, independent of the run: its type, whether it is
/// constant, and its initial value's bytes.
std::string contentKey(memref::GlobalOp global) {
  std::string key;
  llvm::raw_string_ostream os(key);
  os << global.getType() << (global.getConstant() ? " constant " : " ")
     << global.getAlignment().value_or(0) << ' ';
  if (auto dense =
          dyn_cast_or_null<DenseElementsAttr>(global.getInitialValueAttr())) {
    ArrayRef<char> bytes = dense.getRawData();
    os << dense.isSplat() << ' ';
    os.write(bytes.data(), bytes.size());
  } else if (Attribute value = global.getInitialValueAttr()) {
    os << value;
  }
  return key;
}

struct KilnOrderGlobals : kiln::impl::KilnOrderGlobalsBase<KilnOrderGlobals> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<std::pair<std::string, memref::GlobalOp>> keyed;
    for (auto global : module.getOps<memref::GlobalOp>())
      if (global.isPrivate())
        keyed.push_back({contentKey(global), global});
    llvm::sort(keyed,
               [](const auto &a, const auto &b) { return a.first < b.first; });

    SymbolTable symbols(module);
    auto rename = [&](memref::GlobalOp global, StringAttr name) {
      if (failed(symbols.replaceAllSymbolUses(global, name, module)))
        return failure();
      symbols.setSymbolName(global, name);
      return success();
    };
    // Equal globals become one: which of them came first is the run's
    // order, so their uses would otherwise name them by chance.
    SmallVector<memref::GlobalOp> kept;
    for (auto [index, entry] : llvm::enumerate(keyed)) {
      if (index > 0 && entry.first == keyed[index - 1].first) {
        if (failed(symbols.replaceAllSymbolUses(
                entry.second, kept.back().getSymNameAttr(), module)))
          return signalPassFailure();
        symbols.erase(entry.second);
        continue;
      }
      kept.push_back(entry.second);
    }
    // Renamed in two steps, so that no new name meets an old one.
    MLIRContext *context = module.getContext();
    for (auto [index, global] : llvm::enumerate(kept))
      if (failed(rename(global, StringAttr::get(context, "__kiln_renaming_" +
                                                             Twine(index)))))
        return signalPassFailure();
    for (auto [index, global] : llvm::enumerate(kept))
      if (failed(rename(
              global, StringAttr::get(context, "__constant_" + Twine(index)))))
        return signalPassFailure();
    Block *body = module.getBody();
    for (memref::GlobalOp global : llvm::reverse(kept))
      global->moveBefore(body, body->begin());
  }
};

} // namespace
