//===- kiln-runtime-test-bundle.cpp - writes the runtime tests' bundles ---===//
//
//   kiln-runtime-test-bundle --code KERNELS.so --out DIR
//     writes DIR/multi.kiln and DIR/single.kiln around compiled kernels.c
//   kiln-runtime-test-bundle --seeds DIR
//     writes valid bundles (with stand-in code) as the fuzzer's seed corpus
//
//===----------------------------------------------------------------------===//

#include "TestBundles.h"

#include <cstdio>
#include <cstring>
#include <string>

using namespace kiln::runtime;
using namespace kiln::runtime::testing;

namespace {

int fail(const Status &status) {
  std::fprintf(stderr, "kiln-runtime-test-bundle: error: %s\n",
               status.message().c_str());
  return 1;
}

/// Writes DIR/multi.kiln and DIR/single.kiln around `code`.
int writeBundles(const std::string &code, const std::string &dir) {
  BundleWriter multi, single;
  buildMultiBundle(multi, code);
  buildSingleBundle(single, code);
  Status status = multi.write(dir + "/multi.kiln");
  if (status.ok())
    status = single.write(dir + "/single.kiln");
  return status.ok() ? 0 : fail(status);
}

} // namespace

int main(int argc, char **argv) {
  if (argc == 3 && std::strcmp(argv[1], "--seeds") == 0)
    return writeBundles(standInCode(), argv[2]);
  if (argc == 5 && std::strcmp(argv[1], "--code") == 0 &&
      std::strcmp(argv[3], "--out") == 0) {
    std::string code;
    Status status = readFile(argv[2], code);
    return status.ok() ? writeBundles(code, argv[4]) : fail(status);
  }
  std::fprintf(stderr, "usage: kiln-runtime-test-bundle --code KERNELS.so "
                       "--out DIR | --seeds DIR\n");
  return 1;
}
