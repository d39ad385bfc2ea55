//===- ImportONNXTest.cpp - unit tests of the ONNX importer's API ---------===//

#include "NodeContext.h"
#include "kiln/Import/ONNX.h"
#include "kiln/InitAll.h"
#include "kiln/KilnOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

class ImportONNXTest : public ::testing::Test {
protected:
  ImportONNXTest() {
    kiln::registerAllDialects(registry);
    context = std::make_unique<MLIRContext>(registry);
  }

  /// A model computing `y = x + b` with x: [batch, 3] and b an initializer.
  onnx::ModelProto addModel() {
    onnx::ModelProto model;
    model.set_ir_version(8);
    model.add_opset_import()->set_version(17);
    onnx::GraphProto *graph = model.mutable_graph();
    graph->set_name("add");
    onnx::ValueInfoProto *x = graph->add_input();
    x->set_name("x");
    auto *xt = x->mutable_type()->mutable_tensor_type();
    xt->set_elem_type(onnx::TensorProto::FLOAT);
    xt->mutable_shape()->add_dim()->set_dim_param("batch");
    xt->mutable_shape()->add_dim()->set_dim_value(3);
    onnx::TensorProto *b = graph->add_initializer();
    b->set_name("b");
    b->set_data_type(onnx::TensorProto::FLOAT);
    b->add_dims(3);
    for (float v : {1.0f, 2.0f, 3.0f})
      b->add_float_data(v);
    onnx::NodeProto *node = graph->add_node();
    node->set_name("plus");
    node->set_op_type("Add");
    node->add_input("x");
    node->add_input("b");
    node->add_output("y");
    graph->add_output()->set_name("y");
    return model;
  }

  llvm::Expected<OwningOpRef<ModuleOp>>
  import(const onnx::ModelProto &model, const kiln::ImportOptions &options) {
    std::string bytes = model.SerializeAsString();
    return kiln::importONNXBuffer(*context, bytes, "test.onnx", "", options);
  }

  DialectRegistry registry;
  std::unique_ptr<MLIRContext> context;
};

TEST(ParseDimBinding, AcceptsNameEqualsPositiveInteger) {
  auto parsed = kiln::parseDimBinding("batch=32");
  ASSERT_TRUE(static_cast<bool>(parsed));
  EXPECT_EQ(parsed->first, "batch");
  EXPECT_EQ(parsed->second, 32);
}

TEST(ParseDimBinding, RejectsMalformedBindings) {
  for (const char *text : {"batch", "=4", "batch=", "batch=0", "batch=-2",
                           "batch=x", "batch=3.5"}) {
    auto parsed = kiln::parseDimBinding(text);
    EXPECT_FALSE(static_cast<bool>(parsed)) << text;
    if (!parsed)
      llvm::consumeError(parsed.takeError());
  }
}

TEST_F(ImportONNXTest, BindsSymbolicDimAndMakesParams) {
  kiln::ImportOptions options;
  options.dims["batch"] = 4;
  auto module = import(addModel(), options);
  ASSERT_TRUE(static_cast<bool>(module)) << llvm::toString(module.takeError());
  auto function = (*module)->lookupSymbol<func::FuncOp>("forward");
  ASSERT_TRUE(function);
  auto input = cast<RankedTensorType>(function.getArgumentTypes()[0]);
  EXPECT_EQ(input.getShape(), ArrayRef<int64_t>({4, 3}));
  EXPECT_EQ(function.getArgAttrOfType<StringAttr>(0, "kiln.name").getValue(),
            "x");
  auto param = (*module)->lookupSymbol<kiln::ParamOp>("b");
  ASSERT_TRUE(param);
  EXPECT_EQ(cast<RankedTensorType>(param.getType()).getShape(),
            ArrayRef<int64_t>({3}));
  // The bias is broadcast explicitly before the add.
  bool sawBroadcast = false;
  function.walk([&](kiln::BroadcastOp) { sawBroadcast = true; });
  EXPECT_TRUE(sawBroadcast);
}

TEST_F(ImportONNXTest, BatchSizeBindsLeadingDim) {
  kiln::ImportOptions options;
  options.batchSize = 8;
  auto module = import(addModel(), options);
  ASSERT_TRUE(static_cast<bool>(module)) << llvm::toString(module.takeError());
  auto function = (*module)->lookupSymbol<func::FuncOp>("forward");
  EXPECT_EQ(cast<RankedTensorType>(function.getResultTypes()[0]).getShape(),
            ArrayRef<int64_t>({8, 3}));
}

TEST_F(ImportONNXTest, UnboundDimIsAnError) {
  auto module = import(addModel(), {});
  ASSERT_FALSE(static_cast<bool>(module));
  std::string message = llvm::toString(module.takeError());
  EXPECT_NE(message.find("test.onnx: graph input 'x' dimension 0 is symbolic "
                         "('batch')"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("--dim batch=N"), std::string::npos) << message;
}

TEST_F(ImportONNXTest, UnsupportedOpNamesNodeOpAndOpset) {
  onnx::ModelProto model = addModel();
  model.mutable_graph()->mutable_node(0)->set_op_type("FrobnicateNd");
  kiln::ImportOptions options;
  options.batchSize = 2;
  auto module = import(model, options);
  ASSERT_FALSE(static_cast<bool>(module));
  EXPECT_EQ(llvm::toString(module.takeError()),
            "test.onnx: node 'plus' (FrobnicateNd, opset 17): operator "
            "'FrobnicateNd' is not supported");
}

TEST_F(ImportONNXTest, ShapeMismatchIsALocatedError) {
  onnx::ModelProto model = addModel();
  model.mutable_graph()->mutable_initializer(0)->set_dims(0, 2);
  model.mutable_graph()
      ->mutable_initializer(0)
      ->mutable_float_data()
      ->RemoveLast();
  kiln::ImportOptions options;
  options.batchSize = 2;
  auto module = import(model, options);
  ASSERT_FALSE(static_cast<bool>(module));
  std::string message = llvm::toString(module.takeError());
  EXPECT_EQ(message.rfind("test.onnx: node 'plus' (Add, opset 17): ", 0), 0u)
      << message;
  EXPECT_NE(message.find("cannot be broadcast"), std::string::npos) << message;
}

TEST_F(ImportONNXTest, GarbageIsNotAModel) {
  kiln::ImportOptions options;
  for (std::string bytes :
       {std::string("this is not a protobuf at all"),
        std::string("\xff\xff\xff\xff", 4), std::string()}) {
    auto module =
        kiln::importONNXBuffer(*context, bytes, "junk.onnx", "", options);
    ASSERT_FALSE(static_cast<bool>(module));
    std::string message = llvm::toString(module.takeError());
    EXPECT_EQ(message.rfind("junk.onnx: not an ONNX model", 0), 0u) << message;
  }
}

TEST_F(ImportONNXTest, TruncatedModelsNeverCrash) {
  std::string bytes = addModel().SerializeAsString();
  kiln::ImportOptions options;
  options.batchSize = 2;
  for (size_t length = 0; length < bytes.size(); ++length) {
    auto module = kiln::importONNXBuffer(*context, bytes.substr(0, length),
                                         "cut.onnx", "", options);
    if (!module)
      llvm::consumeError(module.takeError());
  }
}

TEST_F(ImportONNXTest, TrainingInfoIsRefused) {
  onnx::ModelProto model = addModel();
  model.add_training_info();
  kiln::ImportOptions options;
  options.batchSize = 2;
  auto module = import(model, options);
  ASSERT_FALSE(static_cast<bool>(module));
  EXPECT_NE(llvm::toString(module.takeError()).find("training_info"),
            std::string::npos);
}

TEST_F(ImportONNXTest, ReadsNpyArrays) {
  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("kiln", "npy", path));
  {
    std::error_code ec;
    llvm::raw_fd_ostream out(path, ec);
    ASSERT_FALSE(ec);
    std::string header = "{'descr': '<i8', 'fortran_order': False, 'shape': "
                         "(2, 2), }";
    header.resize(118 - 1, ' ');
    header += '\n';
    out << "\x93NUMPY" << '\x01' << '\x00' << char(header.size()) << '\x00'
        << header;
    for (int64_t v : {1, -2, 3, 40})
      out.write(reinterpret_cast<const char *>(&v), sizeof(v));
  }
  std::string error;
  auto attr = kiln::onnx_import::readNpyFile(path, context.get(), error);
  llvm::sys::fs::remove(path);
  ASSERT_TRUE(succeeded(attr)) << error;
  EXPECT_EQ(attr->getType().getShape(), ArrayRef<int64_t>({2, 2}));
  auto values = llvm::to_vector(attr->getValues<int64_t>());
  EXPECT_EQ(values, (SmallVector<int64_t>{1, -2, 3, 40}));
}

} // namespace
