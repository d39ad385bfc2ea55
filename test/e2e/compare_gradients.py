"""Prepares the gradient tests: a model with a cross-entropy loss, exported
to ONNX, its inputs, and PyTorch autograd's gradients of the loss with
respect to every parameter, keyed "<onnx initializer name>.grad" as
`kilnc --gradients` names them.

    compare_gradients.py prepare MODEL DIR [--batch N] [--seed S]

MODEL is mlp or gpt2 (test/lib/kiln_onnx_models.py); the comparison itself is
compare_model.py check.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from compare_model import save_npz  # noqa: E402


def wrapped(model_name, masking="add", seq=None):
    from kiln_onnx_models import SEQ, VOCAB, torch_modules
    seq = seq or SEQ
    torch, Mlp, _, Gpt, _ = torch_modules(seq=seq, masking=masking)
    nn = torch.nn

    class WithLoss(nn.Module):
        """The model followed by the mean cross-entropy of its logits."""

        def __init__(self, net, classes):
            super().__init__()
            self.net = net
            self.classes = classes

        def forward(self, x, labels):
            logits = self.net(x)
            return nn.functional.cross_entropy(
                logits.reshape(-1, self.classes), labels.reshape(-1))

    if model_name == "mlp":
        return torch, WithLoss(Mlp(), 10), lambda g, b: (
            torch.tensor(g.standard_normal((b, 16)).astype(np.float32)),
            torch.tensor(g.integers(0, 10, size=(b,)).astype(np.int64)),
            "x")
    return torch, WithLoss(Gpt(), VOCAB), lambda g, b: (
        torch.tensor(g.integers(0, VOCAB, size=(b, seq)).astype(np.int64)),
        torch.tensor(g.integers(0, VOCAB, size=(b, seq)).astype(np.int64)),
        "idx")


def prepare(model_name, out_dir, batch, seed):
    import torch
    torch.manual_seed(seed)
    torch, model, make_inputs = wrapped(model_name)
    model.eval()
    # torch.onnx.export merges initializers with equal values (every fresh
    # LayerNorm's ones and zeros) into one; perturbed, each keeps its own.
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
    x, labels, input_name = make_inputs(np.random.default_rng(seed), batch)
    path = os.path.join(out_dir, model_name + "-loss.onnx")
    torch.onnx.export(model, (x, labels), path, opset_version=17,
                      input_names=[input_name, "labels"], output_names=["loss"],
                      dynamic_axes={input_name: {0: "batch"}, "labels": {0: "batch"}},
                      do_constant_folding=False)
    loss = model(x, labels)
    loss.backward()
    expected = {"loss": loss.detach().numpy()}
    for name, parameter in model.named_parameters():
        expected[name + ".grad"] = parameter.grad.numpy()
    save_npz(os.path.join(out_dir, model_name + "-inputs.npz"),
             {input_name: x.numpy(), "labels": labels.numpy()})
    save_npz(os.path.join(out_dir, model_name + "-grads-expected.npz"), expected)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["prepare"])
    parser.add_argument("model", choices=["mlp", "gpt2"])
    parser.add_argument("dir")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    prepare(args.model, args.dir, args.batch, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
