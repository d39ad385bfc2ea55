//===- ElementType.h - sizes and names of tensor element types --*- C++ -*-===//
//
// Element types are numbered alike in the C API (kiln_element_type_t) and the
// manifest (kiln.bundle.ElementType); these helpers take either.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ELEMENTTYPE_H
#define KILN_RUNTIME_ELEMENTTYPE_H

#include <cstdint>

namespace kiln::runtime {

/// Bytes per element of `type`; 0 for an unknown or unspecified type.
uint64_t elementTypeSize(int type);

/// "f32", "f16", "bf16", "f64", "i64", "i32", "i16", "i8", "u64", "u32",
/// "u16", "u8", "bool", the narrow "f8e4m3fn" ... "u2"; "unknown" for
/// anything else.
const char *elementTypeName(int type);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_ELEMENTTYPE_H
