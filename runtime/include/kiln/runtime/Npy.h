//===- Npy.h - NumPy .npy arrays and .npz archives --------------*- C++ -*-===//
//
// Reads and writes the NumPy formats kiln-run (and the data loader) exchange
// arrays in: .npy format versions 1, 2 and 3 (little-endian, C order), and
// .npz archives of them, plain (numpy.savez) or deflate-compressed
// (numpy.savez_compressed), through libzip. Supported dtypes: f4 f8 f2 i8 i4
// i1 b1. Fortran order, big-endian data and other dtypes are errors naming
// the file and the array.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_NPY_H
#define KILN_RUNTIME_NPY_H

#include "kiln/runtime.h"
#include "kiln/runtime/Bytes.h"
#include "kiln/runtime/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::runtime {

/// A dense, C-order array; `data` holds exactly its bytes, 64-byte aligned.
struct NpyArray {
  kiln_element_type_t elementType = KILN_ELEMENT_TYPE_F32;
  std::vector<int64_t> shape;
  AlignedBuffer data;
  /// Read from a one-byte void ("|V1") or "<f1" array, as ml_dtypes' float8,
  /// float4, int4 and int2 arrays save: the dtype does not say which narrow
  /// type it is (elementType is U8 until adoptNarrowType names it).
  bool narrowBytes = false;
};

/// Whether `type` is a narrow type (float8, float4, int4, int2).
bool isNarrowElementType(int type);

/// Gives an array read as narrow bytes the narrow type `declared` (the
/// bundle's, for the tensor the array is bound to); anything else is left
/// as it is, for the caller's type check to refuse.
void adoptNarrowType(NpyArray &array, int declared);

/// An array of an .npz archive; the name is the entry's without ".npy".
struct NamedArray {
  std::string name;
  NpyArray array;
};

/// The .npy dtype of `type` ("<f4", "|b1", ...; bf16 is "<V2", as
/// ml_dtypes' bfloat16 saves, and the narrow types "|V1", to be read back
/// with `.view(ml_dtypes.float8_e4m3fn)` and so on); nullptr for a type .npy
/// cannot hold.
const char *npyDescr(kiln_element_type_t type);

/// Bytes of an array of `type` and `shape`; false for a negative dimension,
/// an unknown type or a size beyond 2^62.
bool npyByteSize(kiln_element_type_t type, const std::vector<int64_t> &shape,
                 uint64_t &bytes);

/// Allocates `array.data` for its type and shape (zero-filled).
Status allocateNpyArray(NpyArray &array);

/// The .npy header of an array of `type` and `shape`: magic, version (1, or
/// 2 when the header needs it), the dict and padding so that the data starts
/// at a multiple of 64 bytes.
Status encodeNpyHeader(kiln_element_type_t type,
                       const std::vector<int64_t> &shape, std::string &out);

Status readNpyFile(const std::string &path, NpyArray &out);
Status writeNpyFile(const std::string &path, const NpyArray &array);

/// Reads every array of the archive at `path`, in archive order. Every entry
/// must be a `NAME.npy` array, each name once.
Status readNpz(const std::string &path, std::vector<NamedArray> &out);

/// Writes `arrays` to the archive at `path` (replacing it only once the
/// archive is complete), deflate-compressed when `compress` is set.
Status writeNpz(const std::string &path, const std::vector<NamedArray> &arrays,
                bool compress);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_NPY_H
