//===- KilnInterfaces.td - interfaces of kiln ops ----------*- tablegen -*-===//

#ifndef KILN_INTERFACES_TD
#define KILN_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Kiln_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let description = [{
    An op that can build its vector-Jacobian product out of kiln ops: given
    the gradient of a scalar loss with respect to each result (null when a
    result does not influence the loss), it returns the gradient with respect
    to each operand (null for operands that receive none, such as integer
    indices). Ops without this interface pass no gradient; kiln-autodiff
    reports them when a float value on the path to the loss needs one.
  }];
  let cppNamespace = "::kiln";
  let methods = [
    InterfaceMethod<
      "Builds the operands' gradients from the results' gradients.",
      "::llvm::LogicalResult", "buildVJP",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultGradients,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGradients)>
  ];
}

#endif // KILN_INTERFACES_TD
