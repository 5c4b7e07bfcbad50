#!/usr/bin/python3
"""Writes adamw_torch.json: torch.optim.AdamW run for a few steps on a small
flat buffer with two param groups and a frozen range, the golden data for
TestAdamWMatchesTorch. Run with Debian's interpreter: /usr/bin/python3 adamw_torch.py"""
import json

import torch

torch.manual_seed(1)
n, steps = 45, 6
flat = torch.randn(n)
grads = [torch.randn(n) * 0.1 for _ in range(steps)]
grads[2][3] = 0.0  # an element whose second moment stays small
# Views of the flat buffer as PyTorch parameters; [30, 35) is frozen (not
# given to the optimiser).
pieces = {"a": (0, 10), "nodecay": (10, 20), "b": (20, 30), "c": (35, 45)}
params = {k: torch.nn.Parameter(flat[lo:hi].clone()) for k, (lo, hi) in pieces.items()}
base = dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
group = dict(lr=5e-3, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.0)
opt = torch.optim.AdamW(
    [{"params": [params["a"], params["b"], params["c"]]}, {"params": [params["nodecay"]], **group}], **base)
for s in range(steps):
    for k, (lo, hi) in pieces.items():
        params[k].grad = grads[s][lo:hi].clone()
    opt.step()


def gather(get):
    out = flat.clone()
    for k, (lo, hi) in pieces.items():
        out[lo:hi] = get(params[k]).detach()
    return out


m = gather(lambda p: opt.state[p]["exp_avg"])
v = gather(lambda p: opt.state[p]["exp_avg_sq"])
json.dump({
    "torch": torch.__version__,
    "n": n, "frozen": [30, 35], "group": [10, 20],
    "base": {"lr": base["lr"], "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.1},
    "group_hyper": {"lr": 5e-3, "beta1": 0.8, "beta2": 0.99, "eps": 1e-6, "weight_decay": 0.0},
    "init": flat.tolist(), "grads": [g.tolist() for g in grads],
    "params": gather(lambda p: p).tolist(), "m": m.tolist(), "v": v.tolist(),
}, open("adamw_torch.json", "w"), indent=0)
