//===- kiln-runtime-test-bundle.cpp - writes the runtime tests' bundles ---===//
//
//   kiln-runtime-test-bundle --code KERNELS.so --out DIR
//     writes DIR/multi.kiln, DIR/single.kiln and the training bundles
//     DIR/train.kiln, DIR/train-loss-only.kiln, DIR/train-accum.kiln and the
//     data-parallel DIR/train-dp2.kiln and DIR/train-dp4.kiln (batches of 2
//     and 4)
//     around compiled kernels.c, DIR/hybrid.kiln, which adds a CUDA
//     target with kernels.ptx, and the CUDA-only DIR/cuda-all-reduce.kiln
//     (kernels.ptx with all-reduces)
//   kiln-runtime-test-bundle --seeds DIR
//     writes valid bundles (with stand-in code) as the fuzzer's seed corpus
//
//===----------------------------------------------------------------------===//

#include "TestBundles.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

using namespace kiln::runtime;
using namespace kiln::runtime::testing;

namespace {

int fail(const Status &status) {
  std::fprintf(stderr, "kiln-runtime-test-bundle: error: %s\n",
               status.message().c_str());
  return 1;
}

/// Writes DIR/multi.kiln, DIR/single.kiln, the training bundles, the
/// hybrid bundle and the CUDA all-reduce bundle around `code` and `ptx`.
int writeBundles(const std::string &code, const std::string &ptx,
                 const std::string &dir) {
  BundleWriter multi, single, train, lossOnly, accumulating, hybrid, dp2, dp4,
      allReduce;
  buildMultiBundle(multi, code);
  buildHybridBundle(hybrid, code, ptx);
  buildCudaAllReduceBundle(allReduce,
                           {{kiln::bundle::CodeImage::PTX, "compute_80", ptx}});
  buildSingleBundle(single, code);
  buildTrainBundle(train, code, ToyTraining::TrainWithLr);
  buildTrainBundle(lossOnly, code, ToyTraining::TrainLossOnly);
  buildTrainBundle(accumulating, code, ToyTraining::TrainAccumulating);
  buildDataParallelTrainBundle(dp2, code, 2);
  buildDataParallelTrainBundle(dp4, code, 4);
  const std::pair<const BundleWriter *, const char *> bundles[] = {
      {&multi, "multi.kiln"},
      {&single, "single.kiln"},
      {&train, "train.kiln"},
      {&lossOnly, "train-loss-only.kiln"},
      {&accumulating, "train-accum.kiln"},
      {&dp2, "train-dp2.kiln"},
      {&dp4, "train-dp4.kiln"},
      {&hybrid, "hybrid.kiln"},
      {&allReduce, "cuda-all-reduce.kiln"}};
  for (const auto &[writer, name] : bundles) {
    Status status = writer->write(dir + "/" + name);
    if (!status.ok())
      return fail(status);
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc == 3 && std::strcmp(argv[1], "--seeds") == 0)
    return writeBundles(standInCode(), "// stand-in PTX", argv[2]);
  if (argc == 5 && std::strcmp(argv[1], "--code") == 0 &&
      std::strcmp(argv[3], "--out") == 0) {
    std::string code, ptx;
    Status status = readFile(argv[2], code);
    if (status.ok())
      status = readFile(KILN_TEST_PTX_SOURCE, ptx);
    return status.ok() ? writeBundles(code, ptx, argv[4]) : fail(status);
  }
  std::fprintf(stderr, "usage: kiln-runtime-test-bundle --code KERNELS.so "
                       "--out DIR | --seeds DIR\n");
  return 1;
}
