#!/usr/bin/python3
"""Generates examples/mlp/mlp.onnx: a small seeded MLP exported by PyTorch.

The model is 32 features -> Linear(64) -> GELU -> Linear(10) logits, exported
with opset 17 in training mode with a dynamic batch axis named 'batch', the way
users export models for Kiln. mlp_train.onnx is the same network followed by
its mean cross-entropy against an input 'labels', with the output 'loss': what
`kilnc --optimizer` trains. Run with Debian's /usr/bin/python3 (python3-torch).
"""

import argparse
import os

import torch

IN_FEATURES = 32
HIDDEN = 64
CLASSES = 10


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(IN_FEATURES, HIDDEN)
        self.act = torch.nn.GELU()
        self.fc2 = torch.nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class WithLoss(torch.nn.Module):
    """The MLP followed by the mean cross-entropy of its logits."""

    def __init__(self, mlp):
        super().__init__()
        self.mlp = mlp

    def forward(self, x, labels):
        return torch.nn.functional.cross_entropy(self.mlp(x), labels)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", default=os.path.join(here, "mlp.onnx"),
                        help="where to write the model (default: next to this script)")
    args = parser.parse_args()

    torch.manual_seed(0)
    model = MLP()
    example = torch.randn(2, IN_FEATURES)
    torch.onnx.export(
        model,
        (example,),
        args.output,
        opset_version=17,
        training=torch.onnx.TrainingMode.TRAINING,
        do_constant_folding=False,
        input_names=["input"],
        output_names=["logits"],
        dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
    )
    print(f"wrote {args.output} ({os.path.getsize(args.output)} bytes)")

    train_output = os.path.join(os.path.dirname(args.output), "mlp_train.onnx")
    torch.onnx.export(
        WithLoss(model),
        (example, torch.zeros(2, dtype=torch.long)),
        train_output,
        opset_version=17,
        training=torch.onnx.TrainingMode.TRAINING,
        do_constant_folding=False,
        input_names=["input", "labels"],
        output_names=["loss"],
        dynamic_axes={"input": {0: "batch"}, "labels": {0: "batch"}},
    )
    print(f"wrote {train_output} ({os.path.getsize(train_output)} bytes)")


if __name__ == "__main__":
    main()
