//===- Passes.h - the CUDA target's passes ----------------------*- C++ -*-===//

#ifndef KILN_TARGET_CUDA_PASSES_H
#define KILN_TARGET_CUDA_PASSES_H

#include "kiln/Transforms/Passes.h"

namespace kiln {

#define GEN_PASS_DECL
#include "kiln/Target/CUDA/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "kiln/Target/CUDA/Passes.h.inc"

} // namespace kiln

#endif // KILN_TARGET_CUDA_PASSES_H
