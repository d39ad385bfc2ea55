//===- kiln-run.cpp - the Kiln runtime driver -----------------------------===//
//
// This release of Kiln compiles ONNX models to kiln IR; bundles and the
// runtime that executes them are not built yet. The tool says so plainly
// instead of pretending to run anything.
//
//===----------------------------------------------------------------------===//

#include <cstdio>
#include <cstring>

namespace {

void printUsage(std::FILE *out) {
  std::fputs(
      "usage: kiln-run MODEL.kiln [options]\n"
      "\n"
      "Runs a compiled Kiln bundle: inference (--entry forward --inputs "
      "IN.npz\n"
      "--outputs OUT.npz) or training (--data TRAIN.npz --steps N).\n"
      "\n"
      "Not supported yet: this release of Kiln imports ONNX models into kiln "
      "IR\n"
      "(kilnc --emit=kiln); kilnc does not produce bundles yet, so there is "
      "nothing\n"
      "for kiln-run to execute.\n"
      "\n"
      "options:\n"
      "  -h, --help    print this message\n",
      out);
}

} // namespace

int main(int argc, char **argv) {
  if (argc == 2 &&
      (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    printUsage(stdout);
    return 0;
  }
  if (argc < 2) {
    printUsage(stderr);
    return 1;
  }
  std::fprintf(stderr,
               "kiln-run: error: running bundles is not supported yet; this "
               "release of Kiln only imports ONNX into kiln IR (see "
               "kiln-run --help)\n");
  return 1;
}
