"""The Python package against the build: runs, training from iterables
(NumPy and a PyTorch DataLoader), checkpoints, kiln.compile (its AdamW losses
against PyTorch's), errors. Needs KILN_LIBRARY (libkilnrt.so) and KILN_KILNC
(kilnc), as test-python.sh sets them."""
import os
import subprocess
import sys

import numpy as np
import pytest

import kiln

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
MLP = os.path.join(ROOT, "examples", "mlp")


def kilnc(*args):
    subprocess.run([os.environ["KILN_KILNC"], *args], check=True,
                   capture_output=True)


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    d = tmp_path_factory.mktemp("bundles")
    forward = str(d / "mlp.kiln")
    train = str(d / "mlp_train.kiln")
    kilnc(os.path.join(MLP, "mlp.onnx"), "--batch-size=8", "--inference",
          "--target=cpu", "-o", forward)
    kilnc(os.path.join(MLP, "mlp_train.onnx"), "--batch-size=32",
          "--optimizer=sgd", "--lr=0.1", "--momentum=0.9", "--grad-clip=5",
          "--target=cpu", "-o", train)
    return forward, train


def teacher_batches(count, seed=0, batch=32):
    rng = np.random.default_rng(seed)
    teacher = np.random.default_rng(99).standard_normal((32, 10))
    for _ in range(count):
        x = rng.standard_normal((batch, 32)).astype(np.float32)
        yield {"input": x, "labels": np.argmax(x @ teacher, 1).astype(np.int64)}


def test_forward_matches_kiln_run(bundles, tmp_path):
    forward, _ = bundles
    bundle = kiln.Bundle(forward)
    assert [i.name for i in bundle.inputs("forward")] == ["input"]
    assert bundle.inputs("forward")[0].shape == (8, 32)
    x = np.random.default_rng(1).standard_normal((8, 32)).astype(np.float32)
    logits = kiln.Session(bundle).run("forward", input=x)["logits"]
    np.savez(tmp_path / "in.npz", input=x)
    run = os.path.join(os.path.dirname(os.environ["KILN_KILNC"]), "kiln-run")
    subprocess.run([run, forward, "--inputs", str(tmp_path / "in.npz"),
                    "--outputs", str(tmp_path / "out.npz")], check=True)
    assert np.array_equal(logits, np.load(tmp_path / "out.npz")["logits"])


def test_train_from_numpy_iterable(bundles, tmp_path):
    _, train = bundles
    trainer = kiln.Trainer(train)
    records = list(trainer.train(teacher_batches(150), steps=120,
                                 metrics=str(tmp_path / "m.jsonl")))
    assert len(records) == 120 and records[-1]["step"] == 120
    assert set(records[0]) >= {"step", "loss", "lr", "grad_norm", "samples",
                               "samples_per_s", "elapsed_s"}
    first = np.mean([r["loss"] for r in records[:5]])
    last = np.mean([r["loss"] for r in records[-5:]])
    assert last < 0.5 * first, (first, last)
    assert len(open(tmp_path / "m.jsonl").readlines()) == 120


def test_checkpoint_round_trip(bundles, tmp_path):
    _, train = bundles
    trainer = kiln.Trainer(train)
    list(trainer.train(teacher_batches(20), steps=20))
    trainer.save(str(tmp_path / "ckpt.safetensors"))
    held_out = next(teacher_batches(1, seed=7))
    restored = kiln.Trainer(train)
    restored.load(str(tmp_path / "ckpt.safetensors"))
    assert restored.evaluate(held_out) == trainer.evaluate(held_out)
    # Resumed, both take the same next step.
    nxt = list(teacher_batches(1, seed=8))
    a = next(trainer.train(nxt))["loss"]
    b = next(restored.train(nxt))["loss"]
    assert a == b


def test_train_from_torch_dataloader_without_copies(bundles):
    torch = pytest.importorskip("torch")
    _, train = bundles
    batches = list(teacher_batches(60, seed=3))
    x = torch.from_numpy(np.concatenate([b["input"] for b in batches]))
    y = torch.from_numpy(np.concatenate([b["labels"] for b in batches]))
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x, y), batch_size=32, drop_last=True)
    trainer = kiln.Trainer(train)
    losses = [r["loss"] for r in trainer.train(loader)]
    assert len(losses) == 60
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5])
    # A contiguous CPU tensor reaches the runtime as the tensor's memory.
    from kiln._runtime import _as_array
    info = trainer.bundle.inputs("train_step")[0]
    assert np.shares_memory(_as_array(x[:32], info), x.numpy())


def test_compile_a_torch_module_matches_adamw():
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxscript")

    class Classifier(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden = torch.nn.Linear(16, 32)
            self.out = torch.nn.Linear(32, 4)

        def forward(self, features, labels):
            logits = self.out(torch.tanh(self.hidden(features)))
            return torch.nn.functional.cross_entropy(logits, labels)

    torch.manual_seed(0)
    model = Classifier()
    rng = np.random.default_rng(0)
    # One batch, six times: the loss must fall on it.
    batch = (torch.from_numpy(rng.standard_normal((8, 16)).astype(np.float32)),
             torch.from_numpy(rng.integers(0, 4, 8)))
    data = [batch] * 6
    trainer = kiln.compile(model, data[0], optimizer="adamw", lr=1e-2,
                           weight_decay=0.01)
    losses = [r["loss"] for r in trainer.train(data)]
    reference = torch.optim.AdamW(model.parameters(), lr=1e-2,
                                  weight_decay=0.01)
    expected = []
    for features, labels in data:
        reference.zero_grad()
        loss = model(features, labels)
        loss.backward()
        reference.step()
        expected.append(loss.item())
    np.testing.assert_allclose(losses, expected, rtol=1e-5, atol=0)
    assert losses[-1] < losses[0]


def test_errors_carry_the_runtime_message(bundles, tmp_path):
    forward, _ = bundles
    with pytest.raises(kiln.KilnError) as error:
        kiln.Bundle(str(tmp_path / "missing.kiln"))
    assert error.value.status == "io error"
    assert "missing.kiln" in error.value.message
    session = kiln.Session(forward)
    with pytest.raises(kiln.KilnError) as error:
        session.run("forward", input=np.zeros((4, 32), np.float32))
    assert error.value.status == "invalid argument"
    assert "input 'input'" in str(error.value)
    with pytest.raises(kiln.KilnError, match="has no input 'extra'"):
        session.run("forward", input=np.zeros((8, 32), np.float32),
                    extra=np.zeros(1))
    with pytest.raises(kiln.KilnError, match="no train_step"):
        kiln.Trainer(forward)


def test_checkpoint_dir_resume_continues_the_run(bundles, tmp_path):
    import hashlib
    import json
    _, train = bundles
    data = list(teacher_batches(12, seed=5))
    reference = [r["loss"] for r in kiln.Trainer(train).train(data, steps=10)]
    ckpt = tmp_path / "ckpt"
    metrics = str(tmp_path / "m.jsonl")
    first = kiln.Trainer(train)
    losses = [r["loss"] for r in first.train(
        data, steps=6, metrics=metrics, checkpoint_dir=str(ckpt),
        checkpoint_every=4)]
    assert sorted(os.listdir(ckpt)) == [
        "kiln-run.lock", "latest", "step-4.json", "step-4.safetensors",
        "step-6.json", "step-6.safetensors"]
    assert open(ckpt / "latest").read() == "step-6.json\n"
    sidecar = json.load(open(ckpt / "step-6.json"))
    assert sidecar["format"] == "kiln python checkpoint"
    assert sidecar["step"] == 6
    assert sidecar["data"] == {"batches": 6, "samples": 6 * 32}
    assert sidecar["bundle_fingerprint"] == "0x%016x" % first.bundle.fingerprint
    params = open(ckpt / "step-6.safetensors", "rb").read()
    assert sidecar["parameters_sha256"] == hashlib.sha256(params).hexdigest()
    assert params == first.parameters_bytes()

    # A fresh run is refused a directory with checkpoints.
    with pytest.raises(kiln.KilnError) as error:
        list(kiln.Trainer(train).train(data, checkpoint_dir=str(ckpt)))
    assert "already holds checkpoints" in error.value.message

    # As if killed after step 6 but before its checkpoint: resuming from
    # step 4 drops the metrics of steps 5 and 6, skips the 4 batches taken
    # and continues exactly as the uninterrupted run.
    (ckpt / "latest").write_text("step-4.json\n")
    resumed = kiln.Trainer(train)
    rest = list(resumed.train(data, steps=10, metrics=metrics,
                              checkpoint_dir=str(ckpt), resume=True,
                              keep_checkpoints=1))
    assert [r["step"] for r in rest] == [5, 6, 7, 8, 9, 10]
    assert losses[:4] + [r["loss"] for r in rest] == reference
    assert [json.loads(line)["step"] for line in open(metrics)] == list(
        range(1, 11))
    assert sorted(os.listdir(ckpt)) == [
        "kiln-run.lock", "latest", "step-10.json", "step-10.safetensors"]

    # Resumed at its last step, nothing runs and nothing is rewritten.
    again = kiln.Trainer(train)
    assert list(again.train(data, steps=10, checkpoint_dir=str(ckpt),
                            resume=True)) == []
    assert again.step == 10


def test_checkpoint_dir_refusals(bundles, tmp_path):
    import json
    _, train = bundles
    data = list(teacher_batches(4, seed=6))
    ckpt = tmp_path / "ckpt"
    list(kiln.Trainer(train).train(data, steps=2, checkpoint_dir=str(ckpt)))

    # kiln-run refuses to resume from it, saying whose it is.
    np.savez(tmp_path / "data.npz",
             input=np.concatenate([b["input"] for b in data]),
             labels=np.concatenate([b["labels"] for b in data]))
    run = os.path.join(os.path.dirname(os.environ["KILN_KILNC"]), "kiln-run")
    result = subprocess.run([run, train, "--data", str(tmp_path / "data.npz"),
                             "--steps", "4", "--checkpoint-dir", str(ckpt),
                             "--resume"], capture_output=True, text=True)
    assert result.returncode == 1
    assert "was written by the Python trainer" in result.stderr

    # Another bundle (another learning rate: another fingerprint).
    other = str(tmp_path / "other.kiln")
    kilnc(os.path.join(MLP, "mlp_train.onnx"), "--batch-size=32",
          "--optimizer=sgd", "--lr=0.05", "--momentum=0.9", "--grad-clip=5",
          "--target=cpu", "-o", other)
    with pytest.raises(kiln.KilnError) as error:
        list(kiln.Trainer(other).train(data, checkpoint_dir=str(ckpt),
                                       resume=True))
    assert "was written for bundle" in error.value.message

    # A damaged parameters file.
    path = ckpt / "step-2.safetensors"
    damaged = bytearray(path.read_bytes())
    damaged[-1] ^= 1
    path.write_bytes(bytes(damaged))
    with pytest.raises(kiln.KilnError) as error:
        list(kiln.Trainer(train).train(data, checkpoint_dir=str(ckpt),
                                       resume=True))
    assert "does not match its parameters file" in error.value.message

    # A directory in use by a running trainer.
    busy = tmp_path / "busy"
    running = kiln.Trainer(train).train(data, checkpoint_dir=str(busy))
    next(running)
    with pytest.raises(kiln.KilnError) as error:
        list(kiln.Trainer(train).train(data, checkpoint_dir=str(busy)))
    assert "is in use by another run (kiln python trainer process" in \
        error.value.message
    running.close()

    # kiln-run's checkpoints count their data in its --data file.
    runs = tmp_path / "kiln-run"
    runs.mkdir()
    (runs / "step-3.json").write_text(json.dumps(
        {"format": "kiln-run checkpoint", "format_version": 1, "step": 3,
         "parameters": "step-3.safetensors"}))
    (runs / "latest").write_text("step-3.json\n")
    with pytest.raises(kiln.KilnError) as error:
        list(kiln.Trainer(train).train(data, checkpoint_dir=str(runs),
                                       resume=True))
    assert "was written by kiln-run" in error.value.message
    assert "Trainer.load(" in error.value.message


def test_grad_accumulation_matches_kiln_run(tmp_path):
    import json
    bundle = str(tmp_path / "accum.kiln")
    kilnc(os.path.join(MLP, "mlp_train.onnx"), "--batch-size=16",
          "--grad-accum=2", "--optimizer=sgd", "--lr=0.1", "--momentum=0.9",
          "--target=cpu", "-o", bundle)
    micro = list(teacher_batches(9, seed=4, batch=16))
    trainer = kiln.Trainer(bundle)
    assert trainer.grad_accum == 2
    # Nine micro-batches make four steps; the ninth is not run.
    records = list(trainer.train(micro))
    assert [r["step"] for r in records] == [1, 2, 3, 4]
    assert [r["samples"] for r in records] == [32] * 4
    np.savez(tmp_path / "data.npz",
             input=np.concatenate([b["input"] for b in micro[:8]]),
             labels=np.concatenate([b["labels"] for b in micro[:8]]))
    run = os.path.join(os.path.dirname(os.environ["KILN_KILNC"]), "kiln-run")
    subprocess.run([run, bundle, "--data", str(tmp_path / "data.npz"),
                    "--steps", "4", "--no-shuffle", "--metrics",
                    str(tmp_path / "m.jsonl")], check=True,
                   capture_output=True)
    expected = [json.loads(line)["loss"]
                for line in open(tmp_path / "m.jsonl")]
    np.testing.assert_allclose([r["loss"] for r in records], expected,
                               rtol=1e-6, atol=0)
