//===- ProfileMarks.cpp - time and size every command of the CPU step ----===//
//
// Where a CPU training step's time goes, command by command, with the bytes
// each moves and its floating-point work: what a roofline needs. Every entry
// function calls the runtime once when it starts and once after each of its
// commands (a kernel, a product, a call into the runtime); the runtime adds
// the time since the previous call to that command's total when
// KILN_CPU_PROFILE is set and returns at once otherwise. What each command is
// travels with the code, as a table in an exported global.
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/CPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/CastInterfaces.h"
#include "llvm/Support/Path.h"

namespace kiln {
#define GEN_PASS_DEF_KILNPROFILEMARKS
#include "kiln/Target/CPU/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

constexpr StringLiteral kStart = "kiln_cpu_profile_start";
constexpr StringLiteral kMark = "kiln_cpu_profile_mark";
constexpr StringLiteral kSlots = "kiln_cpu_profile_slots";
constexpr StringLiteral kTable = "kiln_cpu_profile_table";

/// One command of an entry function, as the table describes it.
struct Command {
  std::string entry, kind, what, where;
  int64_t flops = 0, read = 0, written = 0;
};

int64_t bytesOf(Type type) {
  auto memref = dyn_cast<MemRefType>(type);
  if (!memref || !memref.hasStaticShape())
    return 0;
  return memref.getNumElements() * ((memref.getElementTypeBitWidth() + 7) / 8);
}

/// The op's source, as short as it reads: the ONNX node's name where the
/// importer gave one, else file:line.
std::string whereOf(Location loc) {
  if (auto fused = dyn_cast<FusedLoc>(loc))
    return fused.getLocations().empty() ? std::string()
                                        : whereOf(fused.getLocations().front());
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (llvm::sys::path::filename(file.getFilename().getValue()) + ":" +
            Twine(file.getLine()))
        .str();
  if (auto callSite = dyn_cast<CallSiteLoc>(loc))
    return whereOf(callSite.getCallee());
  return std::string();
}

/// Describes `op` when it is a linalg op or a copy: the iterations times
/// the floating-point operations of its body, the bytes of its operands
/// read (an output too when the body reads it) and written.
bool describeKernelOp(Operation &op, Command &command) {
  if (auto copy = dyn_cast<memref::CopyOp>(op)) {
    command.what =
        "copy " + std::to_string(bytesOf(copy.getSource().getType())) + " B";
    command.read = command.written = bytesOf(copy.getSource().getType());
    command.where = whereOf(op.getLoc());
    return true;
  }
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp)
    return false;
  int64_t iterations = 1;
  for (int64_t range : linalgOp.getStaticLoopRanges())
    iterations *= ShapedType::isDynamic(range) ? 0 : range;
  for (OpOperand *input : linalgOp.getDpsInputOperands())
    command.read += bytesOf(input->get().getType());
  for (OpOperand &output : linalgOp.getDpsInitsMutable()) {
    command.written += bytesOf(output.get().getType());
    if (linalgOp.payloadUsesValueFromOperand(&output))
      command.read += bytesOf(output.get().getType());
  }
  // The body's arithmetic, named once each in order: "exp, subf".
  int64_t perIteration = 0;
  SmallVector<StringRef> names;
  linalgOp->walk([&](Operation *inner) {
    if (inner == linalgOp.getOperation() ||
        !isa<arith::ArithDialect, math::MathDialect>(inner->getDialect()) ||
        isa<arith::ConstantOp, CastOpInterface>(inner))
      return;
    if (llvm::any_of(inner->getResultTypes(),
                     [](Type t) { return isa<FloatType>(t); }))
      ++perIteration;
    StringRef name = inner->getName().stripDialect();
    if (!llvm::is_contained(names, name))
      names.push_back(name);
  });
  command.flops = iterations * perIteration;
  std::string what = op.getName().getStringRef().str();
  SmallVector<int64_t> ranges = linalgOp.getStaticLoopRanges();
  for (auto [i, range] : llvm::enumerate(ranges))
    what += (i ? "x" : " ") + std::to_string(range);
  if (!names.empty()) {
    constexpr size_t kNames = 6;
    what += " (";
    for (auto [i, name] : llvm::enumerate(names)) {
      if (i == kNames) {
        what += ", ...";
        break;
      }
      what += (i ? ", " : "") + name.str();
    }
    what += ")";
  }
  command.what = what;
  command.where = whereOf(op.getLoc());
  return true;
}

/// A kernel function, described by its one linalg op or copy; by its name
/// when it has none (the emulated CUDA target's kernels).
void describeKernel(func::FuncOp kernel, Command &command) {
  command.kind = "kernel";
  for (Operation &op : kernel.getBody().front())
    if (describeKernelOp(op, command))
      return;
  command.what = kernel.getName().str();
}

/// The command `op` of an entry's block, or nothing when it does no work
/// worth a mark (address arithmetic, views, constants).
std::optional<Command> describe(Operation &op, ModuleOp module) {
  Command command;
  if (auto cost = op.getAttrOfType<DictionaryAttr>("kiln.cost")) {
    auto text = [&](StringRef key) {
      auto value = cost.getAs<StringAttr>(key);
      return value ? value.str() : std::string();
    };
    auto number = [&](StringRef key) {
      auto value = cost.getAs<IntegerAttr>(key);
      return value ? value.getInt() : 0;
    };
    command.kind = text("kind");
    command.what = text("what");
    command.flops = number("flops");
    command.read = number("read");
    command.written = number("written");
    command.where = whereOf(op.getLoc());
    return command;
  }
  if (auto call = dyn_cast<func::CallOp>(op)) {
    auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
    if (callee && !callee.isExternal()) {
      describeKernel(callee, command);
      return command;
    }
    StringRef name = call.getCallee();
    // The team's size, read before a shared product.
    if (name.starts_with("omp_"))
      return std::nullopt;
    command.kind = name.starts_with("kiln_collective") ? "collective" : "call";
    command.what = name.str();
    command.where = whereOf(op.getLoc());
    return command;
  }
  if (op.getNumRegions() == 0 && !isa<memref::CopyOp>(op))
    return std::nullopt;
  // A kernel kiln-outline-kernels left in place (an operand with a strided
  // layout, such as a transposition's).
  command.kind = "kernel";
  if (describeKernelOp(op, command))
    return command;
  command.kind = "loop";
  command.what = op.getName().getStringRef().str();
  command.where = whereOf(op.getLoc());
  return command;
}

/// Tabs and newlines separate the table's fields and rows.
std::string field(StringRef text) {
  std::string out = text.str();
  for (char &c : out)
    if (c == '\t' || c == '\n')
      c = ' ';
  return out;
}

struct KilnProfileMarksPass
    : kiln::impl::KilnProfileMarksBase<KilnProfileMarksPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> entries;
    for (auto function : module.getOps<func::FuncOp>())
      if (!function.isExternal() && function.isPublic())
        entries.push_back(function);
    // Which ops get a mark, entry by entry; ids count across the module.
    std::vector<Command> commands;
    SmallVector<std::pair<func::FuncOp, SmallVector<Operation *>>> marked;
    for (func::FuncOp entry : entries) {
      SmallVector<Operation *> ops;
      for (Operation &op : entry.getBody().front()) {
        std::optional<Command> command = describe(op, module);
        if (!command)
          continue;
        command->entry = entry.getName().str();
        commands.push_back(std::move(*command));
        ops.push_back(&op);
      }
      if (!ops.empty())
        marked.push_back({entry, std::move(ops)});
    }
    if (commands.empty())
      return;

    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    Location loc = module.getLoc();
    Type i64 = b.getI64Type();
    // Slot 0: when the last mark was; then each command's nanoseconds and
    // count. Zero-initialized: .bss.
    auto slotsType =
        MemRefType::get({1 + 2 * static_cast<int64_t>(commands.size())}, i64);
    memref::GlobalOp::create(
        b, loc, kSlots, StringAttr(), slotsType,
        DenseElementsAttr::get(RankedTensorType::get(slotsType.getShape(), i64),
                               b.getI64IntegerAttr(0)),
        /*constant=*/false, b.getI64IntegerAttr(64));
    // The table: one line per command, its id's, tab-separated fields.
    std::string table = "kiln-cpu-profile 1\n";
    for (const Command &c : commands)
      table += field(c.entry) + "\t" + field(c.kind) + "\t" +
               std::to_string(c.flops) + "\t" + std::to_string(c.read) + "\t" +
               std::to_string(c.written) + "\t" + field(c.what) + "\t" +
               field(c.where) + "\n";
    table.push_back('\0');
    LLVM::GlobalOp::create(
        b, loc, LLVM::LLVMArrayType::get(b.getI8Type(), table.size()),
        /*isConstant=*/true, LLVM::Linkage::External, kTable,
        b.getStringAttr(table));
    auto declare = [&](StringRef name, TypeRange inputs) {
      auto function =
          func::FuncOp::create(b, loc, name, b.getFunctionType(inputs, {}));
      function.setPrivate();
      return function;
    };
    func::FuncOp start = declare(kStart, {slotsType});
    func::FuncOp mark = declare(kMark, {slotsType, b.getI32Type()});

    int32_t id = 0;
    for (auto &[entry, ops] : marked) {
      OpBuilder eb = OpBuilder::atBlockBegin(&entry.getBody().front());
      Value slots =
          memref::GetGlobalOp::create(eb, entry.getLoc(), slotsType, kSlots);
      func::CallOp::create(eb, entry.getLoc(), start, ValueRange{slots});
      for (Operation *op : ops) {
        eb.setInsertionPointAfter(op);
        Value idValue = arith::ConstantOp::create(eb, op->getLoc(),
                                                  eb.getI32IntegerAttr(id++));
        func::CallOp::create(eb, op->getLoc(), mark,
                             ValueRange{slots, idValue});
        op->removeAttr("kiln.cost");
      }
    }
  }
};

} // namespace
