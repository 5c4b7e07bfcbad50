#!/usr/bin/python3
"""Times, with PyTorch on the CPU, the picture workloads that dcdit's Go
benchmarks time (vae/ and inception/), under the same case names:

  vae_decode_256_b{B}   the SD VAE decoder (block_out_channels 128/256/512/512,
                        2 layers per block, 32 groups, mid-block attention):
                        latents B×4×32×32 → images B×3×256×256
  vae_encode_256_b{B}   the encoder: images B×3×256×256 → moments B×8×32×32
  inception_b32         Inception v3 to pool3 (torchvision's network, the
                        FID variant's cost) on 32 images of 299×299

The VAE is written here from diffusers' AutoencoderKL layout (random weights:
speed does not depend on them). Each case runs with 1 and 2 intra-op threads
(OpenBLAS held to the same count); "best" keeps the fastest. Prints JSON.

    apt-get install -y python3-torch python3-torchvision libopenblas0-pthread
    /usr/bin/python3 bench/torch_pictures.py [--quick]
"""
import json, os, subprocess, sys, time

QUICK = "--quick" in sys.argv


def timed(fn, reps):
    fn()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def measure(threads):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torchvision
    torch.set_num_threads(threads)
    torch.manual_seed(0)

    class Res(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.n1, self.c1 = nn.GroupNorm(32, cin, eps=1e-6), nn.Conv2d(cin, cout, 3, padding=1)
            self.n2, self.c2 = nn.GroupNorm(32, cout, eps=1e-6), nn.Conv2d(cout, cout, 3, padding=1)
            self.sc = nn.Conv2d(cin, cout, 1) if cin != cout else None

        def forward(self, x):
            h = self.c1(F.silu(self.n1(x)))
            h = self.c2(F.silu(self.n2(h)))
            return (self.sc(x) if self.sc is not None else x) + h

    class Attn(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.n = nn.GroupNorm(32, c, eps=1e-6)
            self.q, self.k, self.v, self.o = (nn.Linear(c, c) for _ in range(4))

        def forward(self, x):
            b, c, h, w = x.shape
            t = self.n(x).view(b, c, h * w).transpose(1, 2)
            a = torch.softmax(self.q(t) @ self.k(t).transpose(1, 2) / c ** 0.5, -1) @ self.v(t)
            return x + self.o(a).transpose(1, 2).reshape(b, c, h, w)

    chans = [128, 256, 512, 512]

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.pq = nn.Conv2d(4, 4, 1)
            self.cin = nn.Conv2d(4, 512, 3, padding=1)
            self.mid = nn.Sequential(Res(512, 512), Attn(512), Res(512, 512))
            ups, prev = [], 512
            for i, c in enumerate(reversed(chans)):
                blocks = [Res(prev if j == 0 else c, c) for j in range(3)]
                prev = c
                ups.append(nn.ModuleDict({"res": nn.Sequential(*blocks),
                                          "up": nn.Conv2d(c, c, 3, padding=1) if i < 3 else nn.Identity()}))
            self.ups = nn.ModuleList(ups)
            self.nout, self.cout = nn.GroupNorm(32, 128, eps=1e-6), nn.Conv2d(128, 3, 3, padding=1)

        def forward(self, z):
            x = self.mid(self.cin(self.pq(z)))
            for i, u in enumerate(self.ups):
                x = u["res"](x)
                if i < 3:
                    x = u["up"](F.interpolate(x, scale_factor=2.0, mode="nearest"))
            return self.cout(F.silu(self.nout(x)))

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.cin = nn.Conv2d(3, 128, 3, padding=1)
            downs, prev = [], 128
            for i, c in enumerate(chans):
                downs.append(nn.ModuleDict({"res": nn.Sequential(Res(prev, c), Res(c, c)),
                                            "down": nn.Conv2d(c, c, 3, stride=2) if i < 3 else nn.Identity()}))
                prev = c
            self.downs = nn.ModuleList(downs)
            self.mid = nn.Sequential(Res(512, 512), Attn(512), Res(512, 512))
            self.nout, self.cout = nn.GroupNorm(32, 512, eps=1e-6), nn.Conv2d(512, 8, 3, padding=1)
            self.q = nn.Conv2d(8, 8, 1)

        def forward(self, x):
            x = self.cin(x)
            for i, d in enumerate(self.downs):
                x = d["res"](x)
                if i < 3:
                    x = d["down"](F.pad(x, (0, 1, 0, 1)))
            return self.q(self.cout(F.silu(self.nout(self.mid(x)))))

    cases = []
    reps = 1 if QUICK else 3
    with torch.no_grad():
        dec, enc = Decoder().eval(), Encoder().eval()
        for b in (1, 4):
            z = torch.randn(b, 4, 32, 32)
            t = timed(lambda: dec(z), reps)
            cases.append({"name": f"vae_decode_256_b{b}", "ms": round(t * 1e3, 1), "images_per_s": round(b / t, 3)})
            x = torch.randn(b, 3, 256, 256)
            t = timed(lambda: enc(x), reps)
            cases.append({"name": f"vae_encode_256_b{b}", "ms": round(t * 1e3, 1), "images_per_s": round(b / t, 3)})
        net = torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=False).eval()
        net.fc = nn.Identity()
        x = torch.rand(32, 3, 299, 299) * 2 - 1
        t = timed(lambda: net(x), reps)
        cases.append({"name": "inception_b32", "ms": round(t * 1e3, 1), "images_per_s": round(32 / t, 2)})
    return cases


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(measure(int(sys.argv[2]))))
        return
    import torch
    result = {"torch": torch.__version__, "cpus": os.cpu_count(), "quick": QUICK, "configs": {}, "best": []}
    best = {}
    for threads in (1, 2):
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
        args = [sys.executable, __file__, "--child", str(threads)] + (["--quick"] if QUICK else [])
        out = subprocess.run(args, env=env, check=True, capture_output=True, text=True).stdout
        cases = json.loads(out.strip().splitlines()[-1])
        result["configs"][f"torch{threads}"] = cases
        for c in cases:
            if c["name"] not in best or c["ms"] < best[c["name"]]["ms"]:
                best[c["name"]] = c
    result["best"] = sorted(best.values(), key=lambda c: c["name"])
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
