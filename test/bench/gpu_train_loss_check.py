"""Runs bench/gpu_train.py's check_losses on hand-made records (see
gpu-train-loss-check.test)."""
import sys

sys.path.insert(0, sys.argv[1])
from gpu_train import check_losses  # noqa: E402

EAGER_LOSSES = [483.6624450683594, 400.9529113769531, 401.33856201171875]
KILN_LOSSES = [483.66147, 401.0972, 285.8414]


def case(what, kiln_losses, kiln_scales, eager_scales):
    kiln = dict(side="kiln", first_losses=kiln_losses)
    eager = dict(side="torch eager", first_losses=EAGER_LOSSES)
    if kiln_scales:
        kiln["first_loss_scales"] = kiln_scales
    if eager_scales:
        eager["first_loss_scales"] = eager_scales
    check_losses(kiln, eager, 0.02)
    note = kiln.get("loss_check_note")
    print("%s: %s %d steps%s" % (what, kiln["loss_check"],
                                 kiln["loss_check_steps"],
                                 " (%s)" % note if note else ""))


case("no skip", KILN_LOSSES, [65536] * 4, [65536] * 4)
case("eager skipped step 2", KILN_LOSSES, [65536] * 4,
     [65536, 65536, 32768, 32768])
case("kiln skipped step 1", KILN_LOSSES, [65536, 32768, 32768, 32768],
     [65536, 65536, 32768, 32768])
case("wrong before the skip", [483.66147, 350.0, 285.8414], [65536] * 4,
     [65536, 65536, 32768, 32768])
case("no scales (bf16)", [483.66147, 401.0972, 401.2], None, None)
