//===- Compile.h - from imported kiln IR to compiled entry points -*- C++
//-*-===//

#ifndef KILN_COMPILER_COMPILE_H
#define KILN_COMPILER_COMPILE_H

#include "kiln/Target/CPU.h"
#include "kiln/Target/CUDA.h"
#include "kiln/Target/Support.h"

#include <optional>

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace kiln {

/// A named tensor of an entry point's signature.
struct TensorInfo {
  std::string name;
  mlir::RankedTensorType type;
  /// For outputs: the parameter this output's value replaces in place
  /// (kiln.update), or empty.
  std::string updates;
};

/// One argument of a compiled entry point, in call order.
struct EntryArgument {
  enum Kind { Input, Output, Param, Arena } kind;
  /// Index into the entry's inputs or outputs, or the model's parameters.
  unsigned index = 0;
};

/// How many kernels one entry point takes at three points of the pipeline:
/// kiln ops after decomposition, linalg ops before fusion, and the calls the
/// compiled code makes (loop nests, BLAS calls, copies) after fusion.
struct KernelCounts {
  int64_t kilnOps = 0;
  int64_t beforeFusion = 0;
  int64_t afterFusion = 0;
};

/// What the arena holds where its live buffers are largest (recorded by
/// kiln-plan-memory): `live` bytes in all, of which forward values
/// (activations), parameter gradients waiting for the update (gradients) and
/// temporaries (workspace).
struct ArenaPeak {
  int64_t live = 0, activations = 0, gradients = 0, workspace = 0;
};

struct CompiledEntry {
  std::string name;
  std::string kernel; // symbol in the target code
  std::vector<TensorInfo> inputs, outputs;
  std::vector<EntryArgument> arguments;
  int64_t arenaBytes = 0;
  ArenaPeak arenaPeak;
  KernelCounts kernels;
};

struct CompiledParam {
  std::string name;
  mlir::RankedTensorType type;
  mlir::DenseElementsAttr value;
  /// Whether training updates it: false for optimizer state, buffers and
  /// parameters that get no gradient.
  bool trainable = true;
  /// Optimizer state (kiln.optimizer_state), which --external-weights
  /// never leaves out: the model's own tensors are the external ones.
  bool optimizerState = false;
  /// Optimizer state sharded over this many ranks (kilnc --shard-optimizer):
  /// each rank holds its own shard. 0: the same on every rank.
  int64_t shardRanks = 0;
  /// The code relies on its initial value (kiln.fixed: a mask buffer the
  /// attention kernels run as causal): the bundle stores it, and the
  /// runtime takes no other.
  bool fixed = false;
};

struct CompiledModel {
  std::vector<CompiledParam> params;
  std::vector<CompiledEntry> entries;
  /// The code for each target compiled for. Entry points take the same
  /// arguments on every target.
  std::optional<CPUCode> cpu;
  std::optional<CUDACode> cuda;
  /// The module's `kiln.metadata` attribute (a dictionary of strings the
  /// bundle's manifest records), or null.
  mlir::Attribute metadata;
};

/// How the CUDA target computes matrix products.
enum class Precision {
  F32,
  /// bf16 operands, f32 accumulation (kiln-amp); everything else f32.
  BF16,
  /// As BF16 with f16 operands; the training step needs a loss scale.
  F16,
};

struct CompileOptions {
  /// The targets to compile for (at least one).
  bool cpuTarget = true, cudaTarget = false;
  CPUTargetOptions cpu;
  CUDATargetOptions cuda;
  /// The CUDA target's precision (--amp); the CPU target computes in f32.
  Precision cudaPrecision = Precision::F32;
  /// Under a 16-bit cudaPrecision: whether the products whose results are
  /// activations store them in the 16-bit type, as autocast does
  /// (--amp-activations; kiln-amp's `store`), or in f32.
  bool ampNarrowActivations = true;
  /// How the CUDA target computes attention and its gradient
  /// (--cuda-attention): Flash, the tensor-core kernels where they apply
  /// (kiln-flash-attention: bf16 or f16 precision, head sizes they have),
  /// loops that never store the scores for the rest; Loops, those loops for
  /// all (kiln-attention-kernel); Expanded, as the CPU target does, products
  /// and softmax kernels; Cudnn, cuDNN's fused attention (16-bit outputs
  /// and gradients) for the causal or unmasked attention it takes, as Flash
  /// for the rest.
  enum class CudaAttention { Flash, Loops, Expanded, Cudnn };
  CudaAttention cudaAttention = CudaAttention::Flash;
  /// Tanh GELUs and their gradients as cuBLASLt epilogues of the products
  /// they read (kiln-gemm-gelu, --cuda-gelu-epilogue).
  bool cudaGeluEpilogue = false;
  /// Prints the IR after every pass to stderr (the debug switch).
  bool printIRAfterAll = false;
  /// Recomputes cheap activations in the backward pass instead of keeping
  /// them (kiln-rematerialize).
  bool rematerialize = false;
  /// Stops once memory is planned: the result has its entries (with their
  /// arenas) and parameters but no code. For kilnc's memory searches. The
  /// plan is the CPU target's when it is one of the targets, else CUDA's.
  bool planOnly = false;
  /// A test aid for machines without a GPU: compiles a CPU bundle whose
  /// entry points run what the CUDA target would run (its kernels, one
  /// thread after another, and its products through BLAS).
  bool emulateCuda = false;
};

/// The bytes of an entry point's inputs, and of its outputs that do not
/// update a parameter in place (those take no memory of their own).
int64_t inputBytes(const CompiledEntry &entry);
int64_t outputBytes(const CompiledEntry &entry);

/// The bytes a session of `model` holds while it runs a step: parameters
/// and optimizer state, the arena (the largest entry point's), and the
/// inputs and outputs of the entry point that has the most (outputs that
/// update a parameter in place take none). Code and the runtime's own
/// memory are not counted.
int64_t sessionBytes(const CompiledModel &model);

/// Compiles the entry functions of an imported module (consumed).
llvm::Expected<CompiledModel> compileModel(mlir::ModuleOp module,
                                           const CompileOptions &options);

} // namespace kiln

#endif // KILN_COMPILER_COMPILE_H
