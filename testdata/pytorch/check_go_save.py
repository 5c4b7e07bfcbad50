#!/usr/bin/env python3
"""Loads the checkpoints that loaders/pytorch.Save wrote with real PyTorch.

    DCDIT_PYTORCH_CHECK_DIR=/tmp/ptcheck go test ./loaders/pytorch -run TestWriteForTorch
    python3 testdata/pytorch/check_go_save.py /tmp/ptcheck

Each file is loaded with torch.load(weights_only=True) and plainly, and every
tensor's dtype, shape and bytes are compared with what Go wrote. Files with an
argparse.Namespace under "args" are expected to be refused by weights_only=True
unless argparse.Namespace is allow-listed (torch.serialization.add_safe_globals,
PyTorch 2.4+). PyTorch 1.x's weights-only unpickler also lacks BINFLOAT
(opcode 71), so it refuses every training checkpoint with optimizer floats,
torch's own included (testdata/pytorch/train.pt); that refusal is expected too.
Exits non-zero on any mismatch.
"""

import argparse
import json
import os
import sys

import torch

DTYPES = {
    "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U8": torch.uint8, "BOOL": torch.bool,
}


def raw_bytes(t):
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def check_state_dict(where, sd, tensors):
    bad = 0
    if list(sd.keys()) != [e["name"] for e in tensors]:
        print(f"{where}: keys {list(sd.keys())}")
        return 1
    for e in tensors:
        t = sd[e["name"]]
        if t.dtype != DTYPES[e["dtype"]] or list(t.shape) != e["shape"] or raw_bytes(t) != bytes.fromhex(e["hex"]):
            print(f"{where}: {e['name']}: {t.dtype} {list(t.shape)} differs from {e['dtype']} {e['shape']}")
            bad += 1
    return bad


def main():
    folder = sys.argv[1]
    with open(os.path.join(folder, "expected.json")) as f:
        expected = json.load(f)
    bad = 0
    for name, exp in expected.items():
        path = os.path.join(folder, name)
        for weights_only in (True, False):
            where = f"{name} (weights_only={weights_only})"
            try:
                obj = torch.load(path, weights_only=weights_only)
            except Exception as e:  # noqa: BLE001
                no_binfloat = "Unsupported operand 71" in str(e) and torch.__version__.startswith("1.")
                if weights_only and (exp["args"] is not None or (exp["training"] and no_binfloat)):
                    print(f"{where}: refused as expected: ...{str(e)[-70:]}")
                    continue
                print(f"{where}: FAILED: {e}")
                bad += 1
                continue
            if exp["training"]:
                keys = ["model", "ema", "opt"] + (["args"] if exp["args"] is not None else [])
                if list(obj.keys()) != keys:
                    print(f"{where}: top-level keys {list(obj.keys())}, want {keys}")
                    bad += 1
                bad += check_state_dict(where + " model", obj["model"], exp["tensors"])
                bad += check_state_dict(where + " ema", obj["ema"], exp["tensors"])
                if exp["args"] is not None:
                    got = vars(obj["args"])
                    want = exp["args"]
                    norm = {k: list(v) if isinstance(v, tuple) else v for k, v in got.items()}
                    if norm != want:
                        print(f"{where}: args {got}, want {want}")
                        bad += 1
                    assert isinstance(obj["args"], argparse.Namespace)
                print(f"{where}: ok; opt = {obj['opt']}")
            else:
                bad += check_state_dict(where, obj, exp["tensors"])
                print(f"{where}: ok ({len(obj)} tensors, {type(obj).__name__})")
    print("torch", torch.__version__, "FAIL" if bad else "PASS")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
