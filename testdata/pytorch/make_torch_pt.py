#!/usr/bin/env python3
"""Writes the small PyTorch sample files that loaders/pytorch tests read.

Run from the repository root with a Python that has torch installed:

    python3 testdata/pytorch/make_torch_pt.py

It writes, into testdata/pytorch/:

  bare.pt        an OrderedDict state dict (F32, F16, BF16, I64, BOOL, a
                 transposed tensor, two tensors sharing one storage, a 0-d
                 scalar, an empty tensor) with an nn.Module-style _metadata
                 attribute
  train.pt       a DiT train.py-style checkpoint {"model", "ema", "opt",
                 "args"} of a tiny module, opt = AdamW state after one step
  proto4.pt      a plain-dict state dict pickled with protocol 4
  malicious.pt   a zip checkpoint whose pickle calls os.system when loaded
                 with plain pickle (never load it in Python)
  legacy.pt      the same kind of state dict in the pre-1.6 (non-zip) format
  script.pt      a TorchScript archive of a tiny module
  expected.json  names, dtypes, shapes, strides, offsets and values of the
                 tensors in bare.pt and train.pt, and train.pt's args

Nothing here is needed by `go test`; the outputs are committed.
"""

import argparse
import collections
import copy
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))

DTYPES = {
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.float64: "F64",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.int16: "I16",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.bool: "BOOL",
}


def describe(name, t):
    """Returns what the Go reader should find for tensor t."""
    flat = t.contiguous().reshape(-1)
    if t.dtype == torch.bool:
        values = [1 if v else 0 for v in flat.tolist()]
    elif t.dtype.is_floating_point:
        # Exact: every F16/BF16 value widens to float64 without rounding.
        values = [float(v) for v in flat.double().tolist()]
    else:
        values = [int(v) for v in flat.tolist()]
    return {
        "name": name,
        "dtype": DTYPES[t.dtype],
        "shape": list(t.shape),
        "strides": list(t.stride()),
        "storage_offset": t.storage_offset(),
        "values": values,
    }


def bare_state_dict():
    g = torch.Generator().manual_seed(1)
    sd = collections.OrderedDict()
    sd["w_f32"] = torch.arange(12, dtype=torch.float32).reshape(3, 4) * 0.5 - 1.0
    sd["w_f16"] = torch.randn(2, 3, generator=g).to(torch.float16)
    sd["w_bf16"] = torch.randn(5, generator=g).to(torch.bfloat16)
    sd["transposed"] = torch.randn(3, 4, generator=g).t()  # shape (4, 3), strides (1, 4)
    base = torch.randn(6, generator=g)
    sd["tied_a"] = base
    sd["tied_b"] = base[2:5]  # same storage, offset 2
    sd["scalar"] = torch.tensor(3.25)
    sd["empty"] = torch.zeros(0, 4)
    sd["i64"] = torch.tensor([1, -2, 3_000_000_000], dtype=torch.int64)
    sd["mask"] = torch.tensor([True, False, True])
    sd["f64"] = torch.tensor([[0.1, -2.5]], dtype=torch.float64)
    # nn.Module.state_dict() attaches this; it is pickled as BUILD state.
    sd._metadata = collections.OrderedDict([("", {"version": 1}), ("blocks.0", {"version": 2})])
    return sd


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 3)
        self.norm = torch.nn.LayerNorm(3)
        self.register_buffer("pos_embed", torch.linspace(-1, 1, 6).reshape(1, 2, 3))

    def forward(self, x):
        return self.norm(self.proj(x)) + self.pos_embed.sum()


class Evil:
    """Pickles as a call to os.system; torch.save only writes it."""

    def __reduce__(self):
        return (os.system, ("echo pwned",))


def main():
    torch.manual_seed(0)
    expected = {"torch_version": torch.__version__}

    sd = bare_state_dict()
    torch.save(sd, os.path.join(HERE, "bare.pt"))
    expected["bare.pt"] = {"tensors": [describe(k, v) for k, v in sd.items()]}

    model = Tiny()
    ema = copy.deepcopy(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0)
    loss = model(torch.randn(2, 4)).square().mean()
    loss.backward()
    opt.step()
    with torch.no_grad():  # DiT's update_ema with decay 0.9999
        for pe, pm in zip(ema.parameters(), model.parameters()):
            pe.mul_(0.9999).add_(pm, alpha=1 - 0.9999)
    args = argparse.Namespace(
        data_path="/data/imagenet/train", results_dir="results", model="DiT-S/2",
        image_size=256, num_classes=1000, epochs=1400, global_batch_size=256,
        global_seed=0, vae="ema", num_workers=4, log_every=100, ckpt_every=50_000,
        lr=1e-4, compile=False, resume=None, betas=(0.9, 0.999),
    )
    checkpoint = {
        "model": model.state_dict(),
        "ema": ema.state_dict(),
        "opt": opt.state_dict(),
        "args": args,
    }
    torch.save(checkpoint, os.path.join(HERE, "train.pt"))
    expected["train.pt"] = {
        "selected": "ema",
        "top_level": list(checkpoint.keys()),
        "tensors": [describe(k, v) for k, v in checkpoint["ema"].items()],
        "model_tensors": [describe(k, v) for k, v in checkpoint["model"].items()],
        "args": {k: list(v) if isinstance(v, tuple) else v for k, v in vars(args).items()},
    }

    p4 = {"a": torch.arange(6, dtype=torch.float32).reshape(2, 3), "b": torch.randn(3, 2).to(torch.bfloat16).t()}
    torch.save(p4, os.path.join(HERE, "proto4.pt"), pickle_protocol=4)
    expected["proto4.pt"] = {"tensors": [describe(k, v) for k, v in p4.items()]}

    torch.save({"x": Evil()}, os.path.join(HERE, "malicious.pt"))

    small = collections.OrderedDict([("w", torch.arange(4, dtype=torch.float32))])
    torch.save(small, os.path.join(HERE, "legacy.pt"), _use_new_zipfile_serialization=False)

    torch.jit.script(torch.nn.Linear(2, 2)).save(os.path.join(HERE, "script.pt"))

    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    for name in ["bare.pt", "train.pt", "proto4.pt", "malicious.pt", "legacy.pt", "script.pt", "expected.json"]:
        print(name, os.path.getsize(os.path.join(HERE, name)), file=sys.stderr)


if __name__ == "__main__":
    main()
