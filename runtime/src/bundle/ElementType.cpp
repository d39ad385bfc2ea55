//===- ElementType.cpp - sizes and names of tensor element types ----------===//

#include "kiln/runtime/ElementType.h"

#include "kiln/runtime.h"

namespace kiln::runtime {

uint64_t elementTypeSize(int type) {
  switch (type) {
  case KILN_ELEMENT_TYPE_F64:
  case KILN_ELEMENT_TYPE_I64:
  case KILN_ELEMENT_TYPE_U64:
    return 8;
  case KILN_ELEMENT_TYPE_F32:
  case KILN_ELEMENT_TYPE_I32:
  case KILN_ELEMENT_TYPE_U32:
    return 4;
  case KILN_ELEMENT_TYPE_F16:
  case KILN_ELEMENT_TYPE_BF16:
  case KILN_ELEMENT_TYPE_I16:
  case KILN_ELEMENT_TYPE_U16:
    return 2;
  case KILN_ELEMENT_TYPE_I8:
  case KILN_ELEMENT_TYPE_U8:
  case KILN_ELEMENT_TYPE_BOOL:
  case KILN_ELEMENT_TYPE_F8E4M3FN:
  case KILN_ELEMENT_TYPE_F8E4M3FNUZ:
  case KILN_ELEMENT_TYPE_F8E5M2:
  case KILN_ELEMENT_TYPE_F8E5M2FNUZ:
  case KILN_ELEMENT_TYPE_F8E8M0:
  case KILN_ELEMENT_TYPE_F4E2M1:
  case KILN_ELEMENT_TYPE_I4:
  case KILN_ELEMENT_TYPE_U4:
  case KILN_ELEMENT_TYPE_I2:
  case KILN_ELEMENT_TYPE_U2:
    return 1;
  default:
    return 0;
  }
}

const char *elementTypeName(int type) {
  switch (type) {
  case KILN_ELEMENT_TYPE_F32:
    return "f32";
  case KILN_ELEMENT_TYPE_F16:
    return "f16";
  case KILN_ELEMENT_TYPE_BF16:
    return "bf16";
  case KILN_ELEMENT_TYPE_F64:
    return "f64";
  case KILN_ELEMENT_TYPE_I64:
    return "i64";
  case KILN_ELEMENT_TYPE_I32:
    return "i32";
  case KILN_ELEMENT_TYPE_I16:
    return "i16";
  case KILN_ELEMENT_TYPE_I8:
    return "i8";
  case KILN_ELEMENT_TYPE_U64:
    return "u64";
  case KILN_ELEMENT_TYPE_U32:
    return "u32";
  case KILN_ELEMENT_TYPE_U16:
    return "u16";
  case KILN_ELEMENT_TYPE_U8:
    return "u8";
  case KILN_ELEMENT_TYPE_BOOL:
    return "bool";
  case KILN_ELEMENT_TYPE_F8E4M3FN:
    return "f8e4m3fn";
  case KILN_ELEMENT_TYPE_F8E4M3FNUZ:
    return "f8e4m3fnuz";
  case KILN_ELEMENT_TYPE_F8E5M2:
    return "f8e5m2";
  case KILN_ELEMENT_TYPE_F8E5M2FNUZ:
    return "f8e5m2fnuz";
  case KILN_ELEMENT_TYPE_F8E8M0:
    return "f8e8m0";
  case KILN_ELEMENT_TYPE_F4E2M1:
    return "f4e2m1";
  case KILN_ELEMENT_TYPE_I4:
    return "i4";
  case KILN_ELEMENT_TYPE_U4:
    return "u4";
  case KILN_ELEMENT_TYPE_I2:
    return "i2";
  case KILN_ELEMENT_TYPE_U2:
    return "u2";

  default:
    return "unknown";
  }
}

} // namespace kiln::runtime
