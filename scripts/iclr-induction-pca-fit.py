#!/usr/bin/env python3
"""The grid fit (Spearman's rho between the 120 pairwise distances of the 16 class means in a PCA plane and the
pairs' hop distances on the grid; icl's metrics.grid_fit) of the follow-up's own Fig. 4 PCAs, read from the plotly
files of andyrdt/iclr_induction (results/ablation/plots/pca_*.html: the centroids' coordinates, and the grid's
edges as the dashed segments between them). So icl's scores of its ablated PCAs have a published side.

  python3 scripts/iclr-induction-pca-fit.py <clone of andyrdt/iclr_induction> [COMMIT]
  python3 scripts/iclr-induction-pca-fit.py --check <head_ablation summary.json>

--check computes the same score from an icl head_ablation summary's projections (its 4x4 grid: word i at row
i // 4, column i % 4) and prints it beside icl's own value, to show the two computations agree."""
import json
import math
import subprocess
import sys

FILES = {"baseline": "pca_baseline.html", "induction ablated": "pca_induction_ablated.html",
         "previous-token ablated": "pca_prev_token_ablated.html"}


def ranks(xs):
    """1-based ranks, ties given their average rank."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return r


def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra)
    vb = sum((y - mb) ** 2 for y in rb)
    return cov / math.sqrt(va * vb)


def hops(n, edges):
    """All-pairs hop distances by breadth-first search."""
    adj = [[] for _ in range(n)]
    for i, j in edges:
        adj[i].append(j)
        adj[j].append(i)
    dist = []
    for s in range(n):
        d = [-1] * n
        d[s] = 0
        queue = [s]
        for u in queue:
            for v in adj[u]:
                if d[v] < 0:
                    d[v] = d[u] + 1
                    queue.append(v)
        dist.append(d)
    return dist


def grid_fit(points, edges):
    n = len(points)
    d = hops(n, edges)
    lay, hop = [], []
    for i in range(n):
        for j in range(i + 1, n):
            lay.append(math.dist(points[i], points[j]))
            hop.append(d[i][j])
    return spearman(lay, hop), len(lay)


def from_html(text):
    """Centroids (name, x, y) and grid edges (index pairs) of one plotly PCA figure."""
    start = text.index("[", text.index("Plotly.newPlot"))
    traces, _ = json.JSONDecoder().raw_decode(text[start:])
    pts = [(t["text"], t["x"][0], t["y"][0]) for t in traces if len(t.get("x", [])) == 1 and "text" in t]
    at = {(x, y): i for i, (_, x, y) in enumerate(pts)}
    edges = set()
    for t in traces:
        xs, ys = t.get("x", []), t.get("y", [])
        if len(xs) <= 1:
            continue
        for k in range(0, len(xs) - 1, 3):  # segments: a, b, None
            a, b = at.get((xs[k], ys[k])), at.get((xs[k + 1], ys[k + 1]))
            if a is None or b is None:
                raise SystemExit("an edge end is not a centroid: the figure's layout is not what this script reads")
            edges.add((min(a, b), max(a, b)))
    return pts, sorted(edges)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        s = json.load(open(sys.argv[2]))
        edges = [(i, i + 1) for i in range(16) if i % 4 < 3] + [(i, i + 4) for i in range(12)]
        for kind, p in s["pca"].items():
            rho, n = grid_fit([tuple(xy) for xy in p["projections"]], edges)
            print(f"{kind:16s} this script {rho:.6f}   icl {p['grid_fit']['rho']:.6f}   ({n} pairs)")
        return
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    repo, commit = sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else "HEAD"
    print(f"andyrdt/iclr_induction at {commit}: grid fit of each Fig. 4 PCA (Spearman rho, layout vs hops)")
    for label, f in FILES.items():
        text = subprocess.run(["git", "-C", repo, "show", f"{commit}:results/ablation/plots/{f}"], check=True,
                              capture_output=True, text=True).stdout
        pts, edges = from_html(text)
        rho, n = grid_fit([(x, y) for _, x, y in pts], edges)
        print(f"  {label:24s} rho {rho:.3f}   ({len(pts)} centroids, {len(edges)} edges, {n} pairs)")


if __name__ == "__main__":
    main()
