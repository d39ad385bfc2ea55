//===- Passes.h - the training passes ---------------------------*- C++ -*-===//

#ifndef KILN_TRANSFORMS_TRAINING_PASSES_H
#define KILN_TRANSFORMS_TRAINING_PASSES_H

#include "kiln/Transforms/Passes.h"

namespace kiln {

#define GEN_PASS_DECL
#include "kiln/Transforms/Training/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "kiln/Transforms/Training/Passes.h.inc"

} // namespace kiln

#endif // KILN_TRANSFORMS_TRAINING_PASSES_H
