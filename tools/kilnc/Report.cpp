//===- Report.cpp - kilnc --report ----------------------------------------===//

#include "Report.h"

#include "llvm/Support/Format.h"

using namespace llvm;

void kilnc::printFusionReport(const kiln::CompiledModel &model,
                              raw_ostream &os) {
  os << "fusion report: kernels per entry point\n";
  os << format("  %-18s %10s %14s %14s\n", "entry point", "kiln ops",
               "before fusion", "after fusion");
  for (const kiln::CompiledEntry &entry : model.entries)
    os << format("  %-18s %10lld %14lld %14lld\n", entry.name.c_str(),
                 static_cast<long long>(entry.kernels.kilnOps),
                 static_cast<long long>(entry.kernels.beforeFusion),
                 static_cast<long long>(entry.kernels.afterFusion));
  os << "  (kiln ops after decomposition; linalg ops before elementwise "
        "fusion; loop nests, library calls and copies in the compiled code)\n";
}

void kilnc::printMemoryReport(const kiln::CompiledModel &model,
                              raw_ostream &os) {
  int64_t trainable = 0, state = 0, trainableCount = 0, stateCount = 0;
  for (const kiln::CompiledParam &param : model.params) {
    bool weight = !param.optimizerState;
    (weight ? trainable : state) += kiln::tensorBytes(param.type);
    ++(weight ? trainableCount : stateCount);
  }
  int64_t arena = 0;
  os << "memory report (bytes)\n";
  os << format("  parameters        %14lld  (%lld tensors)\n",
               static_cast<long long>(trainable),
               static_cast<long long>(trainableCount));
  os << format("  optimizer state   %14lld  (%lld tensors)\n",
               static_cast<long long>(state),
               static_cast<long long>(stateCount));
  os << format("  %-18s %14s %14s %14s\n", "entry point", "inputs", "outputs",
               "arena");
  for (const kiln::CompiledEntry &entry : model.entries) {
    os << format("  %-18s %14lld %14lld %14lld\n", entry.name.c_str(),
                 static_cast<long long>(kiln::inputBytes(entry)),
                 static_cast<long long>(kiln::outputBytes(entry)),
                 static_cast<long long>(entry.arenaBytes));
    arena = std::max(arena, entry.arenaBytes);
  }
  os << format("  peak arena        %14lld  (one per session, shared by the "
               "entry points)\n",
               static_cast<long long>(arena));
  os << format(
      "  session total     %14lld  (parameters, optimizer state, "
      "arena, and the largest\n%34sentry point's inputs and outputs)\n",
      static_cast<long long>(kiln::sessionBytes(model)), "");
  os << "arena contents where the live buffers peak (bytes)\n";
  os << format("  %-18s %14s %14s %14s %14s\n", "entry point", "activations",
               "gradients", "workspace", "live");
  for (const kiln::CompiledEntry &entry : model.entries)
    os << format("  %-18s %14lld %14lld %14lld %14lld\n", entry.name.c_str(),
                 static_cast<long long>(entry.arenaPeak.activations),
                 static_cast<long long>(entry.arenaPeak.gradients),
                 static_cast<long long>(entry.arenaPeak.workspace),
                 static_cast<long long>(entry.arenaPeak.live));
  os << "  (activations: forward values kept for the backward pass; "
        "gradients: parameter\n   gradients waiting for the update; "
        "workspace: temporaries; live: their sum,\n   the least any "
        "placement needs, against the arena above)\n";
}
