#!/usr/bin/env python3
"""PyTorch CPU eager peer of `icl bench train`: the same two models (2-layer attention-only, learned positions,
pre-LayerNorm, W_O without bias, final LayerNorm, unembedding without bias; N(0, 0.02) init, output projections
0.02/sqrt(2 layers)), the same repeated-segment batches (icl_data_repeated_segments re-implemented bit for bit),
AdamW lr 1e-3 with 10 warmup steps and gradient clipping at 1.0, timed after two warm-up steps (the batches are
made before timing; icl's generator runs inside its timed loop).
Prints one line per case: name, steps, steps/s, tokens/s, final loss.
  bench_train_torch.py [STEPS (20)] [THREADS (the core count)]"""
import math
import os
import sys
import time

import torch
import torch.nn as nn

M64 = (1 << 64) - 1


def mix(s):
    s = (s + 0x9E3779B97F4A7C15) & M64
    z = s
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return s, z ^ (z >> 31)


def repeated_segments(B, T, vocab, seg_min, seg_max, seed, step):
    """Same tokens and targets as icl_data_repeated_segments (src/train/train_data.c), repeated_only = 0."""
    tok = [[0] * T for _ in range(B)]
    tgt = [[-1] * T for _ in range(B)]
    for b in range(B):
        s, z = mix(seed)
        s = z ^ step
        s, z = mix(s)
        s = z ^ b
        s, z = mix(s)
        seg = seg_min + z % (seg_max - seg_min + 1)
        for t in range(min(T, seg)):
            s, z = mix(s)
            tok[b][t] = z % vocab
        for t in range(seg, T):
            tok[b][t] = tok[b][t - seg]
        for t in range(T - 1):
            tgt[b][t] = tok[b][t + 1]
    return torch.tensor(tok), torch.tensor(tgt)


class Block(nn.Module):
    def __init__(self, d, nh):
        super().__init__()
        self.nh, self.hd = nh, d // nh
        self.ln = nn.LayerNorm(d, eps=1e-5)
        self.q, self.k, self.v = (nn.Linear(d, d, bias=False) for _ in range(3))
        self.o = nn.Linear(d, d, bias=False)

    def forward(self, x):
        B, T, d = x.shape
        h = self.ln(x)
        q, k, v = (f(h).view(B, T, self.nh, self.hd).transpose(1, 2) for f in (self.q, self.k, self.v))
        s = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd)
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        z = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, d)
        return x + self.o(z)


class AttnOnly(nn.Module):
    def __init__(self, layers, d, nh, ctx, vocab):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, nh) for _ in range(layers))
        self.ln, self.out = nn.LayerNorm(d, eps=1e-5), nn.Linear(d, vocab, bias=False)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith("o.weight") else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, tok):
        x = self.tok(tok) + self.pos(torch.arange(tok.shape[1]))
        for blk in self.blocks:
            x = blk(x)
        return self.out(self.ln(x))


CASES = [("attn2-d256-ctx256-b32", 2, 256, 8, 256, 256, 32), ("meta-d128-h1-T9-b128", 2, 128, 1, 9, 64, 128)]


def bench(name, layers, d, nh, T, vocab, B, steps):
    torch.manual_seed(1)
    model = AttnOnly(layers, d, nh, T, vocab)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and "tok" not in n and "pos" not in n]
    rest = [p for n, p in model.named_parameters() if not (p.dim() == 2 and "tok" not in n and "pos" not in n)]
    opt = torch.optim.AdamW([{"params": decay}, {"params": rest}], lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 10))
    lossf = nn.CrossEntropyLoss(ignore_index=-1)
    batches = [repeated_segments(B, T, vocab, 2, max(2, T // 2), 1, s) for s in range(steps + 2)]  # untimed
    t0 = loss = None
    for s, (tok, tgt) in enumerate(batches):
        if s == 2:
            t0 = time.perf_counter()
        loss = lossf(model(tok).view(-1, vocab), tgt.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
    dt = time.perf_counter() - t0
    sps = steps / dt
    print(f"{name:<22} {steps:6d} steps {sps:8.2f} steps/s {sps * B * T:10.0f} tokens/s  final loss {loss.item():.4f}")


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    torch.set_num_threads(int(sys.argv[2]) if len(sys.argv) > 2 else os.cpu_count())  # default: the cores
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    only = sys.argv[3] if len(sys.argv) > 3 else None  # one case by name (bench-train-peers.sh's rounds)
    if only and only not in [c[0] for c in CASES]:
        sys.exit(f"bench_train_torch: no case {only} ({', '.join(c[0] for c in CASES)})")
    for c in CASES:
        if only is None or c[0] == only:
            bench(*c, steps)


if __name__ == "__main__":
    main()
