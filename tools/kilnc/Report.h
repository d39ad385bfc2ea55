//===- Report.h - kilnc --report ---------------------------------*- C++
//-*-===//

#ifndef KILNC_REPORT_H
#define KILNC_REPORT_H

#include "kiln/Compiler/Compile.h"
#include "llvm/Support/raw_ostream.h"

namespace kilnc {

/// Kernel counts per entry point before and after fusion.
void printFusionReport(const kiln::CompiledModel &model, llvm::raw_ostream &os);

/// Parameter, optimizer-state, input, output and arena bytes per entry point,
/// and the arena a runtime session allocates.
void printMemoryReport(const kiln::CompiledModel &model, llvm::raw_ostream &os);

} // namespace kilnc

#endif // KILNC_REPORT_H
