//===- PipelinesTest.cpp - the pipelines' textual options -----------------===//

#include "kiln/Compiler/Pipelines.h"

#include <gtest/gtest.h>

namespace {

using kiln::TrainingOptions;

TEST(PipelinesTest, DefaultsPrintAsNothing) {
  EXPECT_EQ(kiln::printTrainingOptions(TrainingOptions()), "");
  auto parsed = kiln::parseTrainingOptions("");
  ASSERT_TRUE(static_cast<bool>(parsed));
  EXPECT_EQ(parsed->labels, "labels");
  EXPECT_EQ(parsed->lr, 0.01);
}

// Every option away from its default survives printing and reading back:
// the text is what kilnc --dump-pipeline prints and kiln-opt reads.
TEST(PipelinesTest, EveryTrainingOptionRoundTrips) {
  TrainingOptions options;
  options.loss = "cross_entropy";
  options.lossOn = "logits";
  options.labels = "targets with spaces";
  options.lossOutput = "total";
  options.lossClassAxis = -1;
  options.ignoreIndex = 0;
  options.labelSmoothing = 0.1;
  options.freeze = "^emb\\..*";
  options.optimizer = "adamw";
  options.keepGradients = true;
  options.lr = 3e-4;
  options.momentum = 0.9;
  options.nesterov = true;
  options.weightDecay = 1.0 / 3.0;
  options.beta1 = 0.8;
  options.beta2 = 0.95;
  options.eps = 1e-6;
  options.lrDecay = 0.5;
  options.initialAccumulator = 0.25;
  options.schedule = "cosine";
  options.warmupSteps = 10;
  options.totalSteps = 1000;
  options.gradClip = 1.0;
  options.gradAccum = 4;
  options.dataParallel = true;
  options.bucketBytes = 1 << 20;
  options.shardOptimizer = 8;
  options.lossScale = 65536;
  options.lossScaleGrowthInterval = 100;
  std::string text = kiln::printTrainingOptions(options);
  auto back = kiln::parseTrainingOptions(text);
  ASSERT_TRUE(static_cast<bool>(back)) << llvm::toString(back.takeError());
  EXPECT_EQ(kiln::printTrainingOptions(*back), text);
  EXPECT_EQ(back->labels, "targets with spaces");
  EXPECT_EQ(back->freeze, "^emb\\..*");
  EXPECT_EQ(back->weightDecay, 1.0 / 3.0);
  EXPECT_EQ(back->lr, 3e-4);
  EXPECT_EQ(back->lossClassAxis, -1);
  EXPECT_TRUE(back->keepGradients);
  EXPECT_TRUE(back->nesterov);
  EXPECT_EQ(back->shardOptimizer, 8);
  // Every option was printed: one key=value for each of the 29.
  EXPECT_EQ(std::count(text.begin(), text.end(), '='), 29) << text;
  EXPECT_NE(text.find("lr=0.0003 "), std::string::npos) << text;
  EXPECT_NE(text.find("labels={targets with spaces}"), std::string::npos)
      << text;
}

TEST(PipelinesTest, BadTrainingOptionsAreErrors) {
  struct Case {
    const char *text, *message;
  };
  const Case cases[] = {
      {"optimiser=adamw", "unknown option 'optimiser'"},
      {"lr=fast", "option 'lr': 'fast' is not a number"},
      {"grad-accum=2.5", "option 'grad-accum': '2.5' is not an integer"},
      {"nesterov=maybe", "option 'nesterov': 'maybe' is not true or false"},
      {"lr=1 lr=2", "option 'lr' is given twice"},
      {"labels={open", "option 'labels': no '}' closes its value"},
      {"adamw", "expected key=value, not 'adamw'"},
  };
  for (const Case &test : cases) {
    SCOPED_TRACE(test.text);
    auto parsed = kiln::parseTrainingOptions(test.text);
    ASSERT_FALSE(static_cast<bool>(parsed));
    std::string message = llvm::toString(parsed.takeError());
    EXPECT_NE(message.find(test.message), std::string::npos) << message;
  }
}

TEST(PipelinesTest, CompileOptionsRoundTrip) {
  kiln::CompileOptions options;
  options.cpuTarget = false;
  options.cudaTarget = true;
  options.cudaPrecision = kiln::Precision::F16;
  options.cudaAttention = kiln::CompileOptions::CudaAttention::Loops;
  options.rematerialize = true;
  std::string text = kiln::printCompileOptions(options);
  EXPECT_EQ(text, "target=cuda amp=fp16 cuda-attention=loops "
                  "rematerialize=true");
  auto back = kiln::parseCompileOptions(text);
  ASSERT_TRUE(static_cast<bool>(back)) << llvm::toString(back.takeError());
  EXPECT_FALSE(back->cpuTarget);
  EXPECT_TRUE(back->cudaTarget);
  EXPECT_EQ(back->cudaPrecision, kiln::Precision::F16);
  EXPECT_EQ(back->cudaAttention, kiln::CompileOptions::CudaAttention::Loops);
  EXPECT_TRUE(back->rematerialize);
  EXPECT_EQ(kiln::printCompileOptions(kiln::CompileOptions()), "target=cpu");

  auto emulatedCuda = kiln::parseCompileOptions("target=cuda emulate-cuda=1");
  ASSERT_FALSE(static_cast<bool>(emulatedCuda));
  EXPECT_NE(llvm::toString(emulatedCuda.takeError()).find("target=cpu"),
            std::string::npos);
}

} // namespace
