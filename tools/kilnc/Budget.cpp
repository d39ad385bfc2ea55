//===- Budget.cpp - kilnc's memory budget and batch search ----------------===//

#include "Budget.h"

#include "llvm/ADT/StringExtras.h"

using namespace llvm;

namespace {

cl::OptionCategory &category() {
  static cl::OptionCategory c("kilnc memory options");
  return c;
}

cl::opt<std::string> memoryBudgetFlag(
    "memory-budget",
    cl::desc("Fit the step's memory (parameters, optimizer state, arena, "
             "inputs and outputs) in this many bytes (e.g. 300M, 2GiB), "
             "recomputing cheap activations in the backward pass if needed; "
             "fails with the smallest budget reachable otherwise"),
    cl::value_desc("bytes"), cl::cat(category()));

cl::opt<std::string> maxBatchForFlag(
    "max-batch-for",
    cl::desc("Print the largest batch size whose step fits in this many "
             "bytes (as --memory-budget counts them) and exit"),
    cl::value_desc("bytes"), cl::cat(category()));

std::optional<int64_t> budget, maxBatchBytes;

/// The largest batch size --max-batch-for tries.
constexpr int64_t kMaxBatch = 1 << 16;

/// What a session of the module would hold, planned without generating
/// code, with or without recomputing cheap activations.
Expected<int64_t> plannedBytes(mlir::ModuleOp module, bool recompute,
                               const kiln::CompileOptions &options) {
  mlir::OwningOpRef<mlir::ModuleOp> copy(module.clone());
  kiln::CompileOptions plan = options;
  plan.rematerialize = recompute;
  plan.planOnly = true;
  plan.printIRAfterAll = false;
  auto compiled = kiln::compileModel(*copy, plan);
  if (!compiled)
    return compiled.takeError();
  return kiln::sessionBytes(*compiled);
}

/// The memory of one module: as compiled, and (when that does not fit)
/// with cheap activations recomputed.
struct Fit {
  int64_t plain = 0;
  std::optional<int64_t> recomputed;
  bool fits = false;
  int64_t best() const {
    return recomputed ? std::min(plain, *recomputed) : plain;
  }
};

Expected<Fit> measure(mlir::ModuleOp module, int64_t bytes,
                      const kiln::CompileOptions &options) {
  Fit fit;
  auto plain = plannedBytes(module, /*recompute=*/false, options);
  if (!plain)
    return plain.takeError();
  fit.plain = *plain;
  fit.fits = fit.plain <= bytes;
  if (!fit.fits) {
    auto recomputed = plannedBytes(module, /*recompute=*/true, options);
    if (!recomputed)
      return recomputed.takeError();
    fit.recomputed = *recomputed;
    fit.fits = *recomputed <= bytes;
  }
  return fit;
}

std::string describe(const Fit &fit) {
  std::string text = std::to_string(fit.plain) + " bytes";
  if (fit.recomputed)
    text += ", " + std::to_string(*fit.recomputed) +
            " with cheap activations recomputed";
  return text;
}

Error error(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), message);
}

} // namespace

cl::OptionCategory &kilnc::memoryCategory() { return category(); }

Expected<int64_t> kilnc::parseBytes(StringRef text) {
  StringRef number = text.trim();
  int shift = 0;
  StringRef unit =
      number.drop_while([](char c) { return isDigit(c) || c == '.'; });
  number = number.drop_back(unit.size());
  std::string lower = unit.lower();
  if (lower == "" || lower == "b")
    shift = 0;
  else if (lower == "k" || lower == "kib")
    shift = 10;
  else if (lower == "m" || lower == "mib")
    shift = 20;
  else if (lower == "g" || lower == "gib")
    shift = 30;
  else
    return error("'" + text +
                 "' is not a byte count (a number, optionally "
                 "followed by K, M or G, or KiB, MiB or GiB)");
  double value;
  if (number.empty() || number.getAsDouble(value) || value <= 0)
    return error("'" + text + "' is not a positive byte count");
  double bytes = value * static_cast<double>(int64_t(1) << shift);
  if (bytes >= 9.2e18)
    return error("'" + text + "' is too large");
  if (shift == 0 && value != static_cast<double>(static_cast<int64_t>(value)))
    return error("'" + text + "' is not a whole number of bytes");
  return static_cast<int64_t>(bytes);
}

Error kilnc::checkMemoryFlags(bool batchGiven) {
  if (memoryBudgetFlag.getNumOccurrences()) {
    auto bytes = parseBytes(memoryBudgetFlag);
    if (!bytes)
      return error("--memory-budget: " + toString(bytes.takeError()));
    budget = *bytes;
  }
  if (maxBatchForFlag.getNumOccurrences()) {
    auto bytes = parseBytes(maxBatchForFlag);
    if (!bytes)
      return error("--max-batch-for: " + toString(bytes.takeError()));
    maxBatchBytes = *bytes;
    if (batchGiven)
      return error("--max-batch-for chooses the batch size; leave out "
                   "--batch-size");
    if (budget)
      return error("--max-batch-for and --memory-budget do not go together: "
                   "find the batch size first, then compile it with the "
                   "budget");
  }
  return Error::success();
}

std::optional<int64_t> kilnc::memoryBudget() { return budget; }
std::optional<int64_t> kilnc::maxBatchFor() { return maxBatchBytes; }

Error kilnc::fitMemoryBudget(mlir::ModuleOp module, int64_t bytes,
                             kiln::CompileOptions &options) {
  auto fit = measure(module, bytes, options);
  if (!fit)
    return fit.takeError();
  if (!fit->fits)
    return error("the step needs " + describe(*fit) +
                 "; --memory-budget=" + std::to_string(bytes) +
                 " is below the smallest budget reachable, " +
                 std::to_string(fit->best()) + " bytes");
  options.rematerialize = fit->recomputed.has_value();
  return Error::success();
}

Error kilnc::printMaxBatch(ModuleAtBatch build, int64_t bytes,
                           const kiln::CompileOptions &options,
                           raw_ostream &os) {
  auto at = [&](int64_t batch) -> Expected<Fit> {
    auto module = build(batch);
    if (!module)
      return module.takeError();
    return measure(**module, bytes, options);
  };
  auto one = at(1);
  if (!one)
    return one.takeError();
  if (!one->fits)
    return error("even batch size 1 needs " + describe(*one) +
                 ", more than --max-batch-for=" + std::to_string(bytes));
  // Double until a batch does not fit, then bisect.
  int64_t good = 1, bad = 0;
  Fit goodFit = *one, badFit;
  for (int64_t batch = 2; batch <= kMaxBatch; batch *= 2) {
    auto fit = at(batch);
    if (!fit)
      return fit.takeError();
    if (batch == 2 && fit->plain == one->plain)
      return error("the step takes the same memory at batch sizes 1 and 2: "
                   "the model's inputs have no symbolic batch dimension for "
                   "--batch-size to bind");
    if (!fit->fits) {
      bad = batch;
      badFit = *fit;
      break;
    }
    good = batch;
    goodFit = *fit;
  }
  while (bad && bad - good > 1) {
    int64_t middle = good + (bad - good) / 2;
    auto fit = at(middle);
    if (!fit)
      return fit.takeError();
    (fit->fits ? good : bad) = middle;
    (fit->fits ? goodFit : badFit) = *fit;
  }
  if (!bad) {
    os << "every batch size up to " << kMaxBatch << " fits in " << bytes
       << " bytes (batch " << good << ": " << describe(goodFit) << ")\n";
    return Error::success();
  }
  os << "largest batch size whose step fits in " << bytes << " bytes: " << good
     << "\n";
  os << "  batch " << good << ": " << describe(goodFit) << "\n";
  os << "  batch " << bad << ": " << describe(badFit) << "\n";
  if (goodFit.plain > bytes)
    os << "  (it fits with cheap activations recomputed: compile it with "
          "--batch-size="
       << good << " --memory-budget=" << bytes << ")\n";
  return Error::success();
}
