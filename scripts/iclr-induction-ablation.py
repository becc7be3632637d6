#!/usr/bin/env python3
"""Reads the follow-up's published ablation arrays (andyrdt/iclr_induction, results/ablation/data/*.npz) at a
commit and prints the numbers docs/results.md sets beside icl's: mean accuracy over a window of words for each k,
for the induction and previous-token sweeps and their random controls (32 heads outside the top 32 of each kind, 4
sets, mean), and the baseline (k = 0).

    python3 scripts/iclr-induction-ablation.py GITDIR [COMMIT ...] [--from 1000 --to 1400]

GITDIR is a clone (or bare mirror) of https://github.com/andyrdt/iclr_induction; each COMMIT (default HEAD) is read
with `git show`, nothing is checked out. Needs numpy. Each array is [1400]: the accuracy per position, the mean over
the 16 walks of one seed (02_ablation.py: grid.generate_batch, one walk per start word, seed 42), so the file gives
no per-walk spread and no standard error. Words FROM..TO are 1-based and inclusive (array indices FROM-1..TO-1).
"""
import argparse
import io
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    sys.exit("iclr-induction-ablation: numpy is needed (pip install numpy)")

KS = [0, 1, 2, 4, 8, 16, 32]
FILES = {"induction": "results/ablation/data/accuracy_induction.npz",
         "previous_token": "results/ablation/data/accuracy_prev_token.npz"}


def load(gitdir, commit, path):
    try:
        blob = subprocess.run(["git", "--git-dir", gitdir, "show", f"{commit}:{path}"], check=True,
                              capture_output=True).stdout
    except subprocess.CalledProcessError as e:
        sys.exit(f"iclr-induction-ablation: {gitdir} {commit}:{path}: {e.stderr.decode().strip()}")
    return np.load(io.BytesIO(blob))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gitdir")
    ap.add_argument("commits", nargs="*", default=["HEAD"])
    ap.add_argument("--from", dest="lo", type=int, default=1000)
    ap.add_argument("--to", dest="hi", type=int, default=1400)
    a = ap.parse_args()
    if not 1 <= a.lo <= a.hi:
        sys.exit(f"iclr-induction-ablation: --from {a.lo} --to {a.hi}: need 1 <= from <= to")
    for commit in a.commits:
        full = subprocess.run(["git", "--git-dir", a.gitdir, "rev-parse", commit], capture_output=True,
                              text=True).stdout.strip() or commit
        print(f"commit {full}: mean accuracy over words {a.lo}-{a.hi}")
        data = {kind: load(a.gitdir, commit, path) for kind, path in FILES.items()}
        for kind, d in data.items():
            n = d["k0"].shape[0]
            if a.hi > n:
                sys.exit(f"iclr-induction-ablation: --to {a.hi}: the arrays hold {n} positions")
        print(f"  {'k':>6} {'induction':>10} {'prev-token':>10}")
        for k in KS:
            row = [float(d[f"k{k}"][a.lo - 1:a.hi].mean()) for d in data.values()]
            print(f"  {k:>6} {row[0]:>10.3f} {row[1]:>10.3f}")
        row = [float(d["random"][a.lo - 1:a.hi].mean()) for d in data.values()]
        print(f"  {'rnd32':>6} {row[0]:>10.3f} {row[1]:>10.3f}   (random control of each sweep)")


if __name__ == "__main__":
    main()
