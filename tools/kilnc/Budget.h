//===- Budget.h - kilnc's memory budget and batch search --------*- C++ -*-===//
//
// --memory-budget: fit the step in a number of bytes, recomputing cheap
// activations (kiln-rematerialize) if that is what it takes, or fail with
// the smallest budget that can be met. --max-batch-for: the largest batch
// size whose step fits in a number of bytes.
//
//===----------------------------------------------------------------------===//

#ifndef KILNC_BUDGET_H
#define KILNC_BUDGET_H

#include "kiln/Compiler/Compile.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>

namespace kilnc {

llvm::cl::OptionCategory &memoryCategory();

/// "300000000", "300M", "1.5GiB": a byte count (K, M, G are powers of
/// 1024, with or without "iB"; a plain number or one ending in B is bytes).
llvm::Expected<int64_t> parseBytes(llvm::StringRef text);

/// Parses and checks --memory-budget and --max-batch-for; `batchGiven` is
/// whether --batch-size was.
llvm::Error checkMemoryFlags(bool batchGiven);

/// The --memory-budget in bytes, if given.
std::optional<int64_t> memoryBudget();

/// The --max-batch-for in bytes, if given.
std::optional<int64_t> maxBatchFor();

/// Makes `module` (kiln IR after the training passes) fit the memory
/// budget: leaves `options` as they are if its step fits, turns on
/// recomputing cheap activations if that makes it fit, and otherwise fails
/// naming the smallest budget reachable.
llvm::Error fitMemoryBudget(mlir::ModuleOp module, int64_t budget,
                            kiln::CompileOptions &options);

/// Builds the kiln IR of the model (after the training passes) with its
/// batch dimension bound to the given size.
using ModuleAtBatch =
    llvm::function_ref<llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>(
        int64_t)>;

/// Finds the largest batch size whose step fits in `bytes` (recomputing
/// cheap activations where that makes it fit) and prints it, with the
/// memory of that batch and of the next, to `os`.
llvm::Error printMaxBatch(ModuleAtBatch build, int64_t bytes,
                          const kiln::CompileOptions &options,
                          llvm::raw_ostream &os);

} // namespace kilnc

#endif // KILNC_BUDGET_H
