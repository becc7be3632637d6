#!/usr/bin/env python3
"""Exact float64 reference fixtures for icl.

    make-fixtures-exact.py MODEL.gguf FIXTURE_DIR OUT_DIR [--only chat,code,...]
                           [--no-dequant-check]

Reads MODEL.gguf with gguf-py, dequantizes every tensor with
gguf.quants.dequantize (checked, tensor by tensor, against an independent
dequantizer written here from the block layouts), and runs the forward pass of
the model (llama or gemma3) in numpy float64 over the whole sequence at once
(causal mask; no KV cache, no activation quantization). For every prompt
fixture FIXTURE_DIR/<name>.json written by make-fixtures.py (llama.cpp), it
takes that fixture's token ids (so tokenization is identical), and writes
OUT_DIR/<name>.json in the same format: top-20 ids and logits per position,
log-sum-exp per position, the logit of the next token, mean NLL.

It then prints, per prompt, how the llama.cpp fixture (and its f32 variant,
FIXTURE_DIR/f32/<name>.json, when present) compares with the exact result.

The format and definitions are in docs/fixtures.md ("Exact float64
fixtures"). This script is a test oracle only: nothing in icl runs Python.
"""
import argparse
import hashlib
import json
import math
import os
import sys
import time
from importlib.metadata import version

import numpy as np
from gguf import GGUFReader, GGMLQuantizationType as QT
from gguf.quants import dequantize

TOP_K = 20
LOGIT_DECIMALS = 5     # top_logits, next_logit, lse
NLL_DECIMALS = 6       # mean_nll
PROMPTS = ["chat", "code", "multilingual", "paragraph", "grid_walk"]
POS_CHUNK = 128        # positions per LM-head block (Gemma: 128 x 262144 f64 = 268 MB)

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
TOOL = "numpy float64 reference (scripts/make-fixtures-exact.py)"
COMPUTE = ("numpy float64 forward pass written from the architecture definitions "
           "(docs/fixtures.md, 'Exact float64 fixtures'): weights dequantized with "
           "gguf.quants.dequantize (f32 values, as ggml's dequantizers produce them) "
           "and widened to float64; every activation, matmul, norm, RoPE angle, "
           "softmax and the KV values in float64; whole sequence in one pass with a "
           "causal mask")


def log(msg):
    print("make-fixtures-exact: " + msg, file=sys.stderr, flush=True)


# ---- independent dequantizers (float64, from the block layouts) -------------

def _f16(b, off):
    """fp16 field at byte offset `off` of each block (rows of uint8) -> float64."""
    return b[:, off:off + 2].copy().view(np.float16).astype(np.float64)[:, 0]


def my_dequant(raw, qtype, n):
    """Dequantize n values from raw uint8 bytes; float64, computed exactly."""
    raw = np.ascontiguousarray(raw).reshape(-1)
    if qtype == QT.F32:
        return raw.view(np.float32).astype(np.float64)
    if qtype == QT.F16:
        return raw.view(np.float16).astype(np.float64)
    if qtype == QT.Q8_0:
        b = raw.reshape(-1, 34)
        d = _f16(b, 0)
        q = b[:, 2:34].view(np.int8).astype(np.float64)
        return (d[:, None] * q).reshape(-1)
    if qtype == QT.Q4_1:
        b = raw.reshape(-1, 20)
        d, m = _f16(b, 0), _f16(b, 2)
        qs = b[:, 4:20]
        q = np.concatenate([qs & 0xF, qs >> 4], axis=1).astype(np.float64)
        return (d[:, None] * q + m[:, None]).reshape(-1)
    if qtype == QT.Q5_0:
        b = raw.reshape(-1, 22)
        d = _f16(b, 0)
        qh = b[:, 2:6].copy().view(np.uint32)[:, 0]
        qs = b[:, 6:22].astype(np.uint32)
        j = np.arange(16, dtype=np.uint32)
        lo = (qs & 0xF) | (((qh[:, None] >> j) & 1) << 4)
        hi = (qs >> 4) | (((qh[:, None] >> (j + 16)) & 1) << 4)
        q = np.concatenate([lo, hi], axis=1).astype(np.float64) - 16
        return (d[:, None] * q).reshape(-1)
    if qtype == QT.Q4_K:
        b = raw.reshape(-1, 144)
        d, dmin = _f16(b, 0), _f16(b, 2)
        s = b[:, 4:16].astype(np.int64)
        qs = b[:, 16:144]
        sc = np.empty((b.shape[0], 8)); mn = np.empty((b.shape[0], 8))
        for j in range(8):
            if j < 4:
                sc[:, j] = s[:, j] & 63
                mn[:, j] = s[:, j + 4] & 63
            else:
                sc[:, j] = (s[:, j + 4] & 0xF) | ((s[:, j - 4] >> 6) << 4)
                mn[:, j] = (s[:, j + 4] >> 4) | ((s[:, j] >> 6) << 4)
        out = np.empty((b.shape[0], 256))
        for c in range(4):
            q = qs[:, 32 * c:32 * c + 32]
            for half, qq in ((0, q & 0xF), (1, q >> 4)):
                sb = 2 * c + half
                out[:, 64 * c + 32 * half:64 * c + 32 * half + 32] = \
                    (d * sc[:, sb])[:, None] * qq - (dmin * mn[:, sb])[:, None]
        return out.reshape(-1)
    if qtype == QT.Q6_K:
        b = raw.reshape(-1, 210)
        out = np.empty((b.shape[0], 256))
        d = _f16(b, 208)
        scales = b[:, 192:208].view(np.int8).astype(np.float64)
        for h in range(2):
            ql = b[:, 64 * h:64 * h + 64].astype(np.int64)
            qh = b[:, 128 + 32 * h:128 + 32 * h + 32].astype(np.int64)
            sc = scales[:, 8 * h:8 * h + 8]
            y = out[:, 128 * h:128 * h + 128]
            for l in range(32):
                i = l // 16
                q1 = ((ql[:, l] & 0xF) | (((qh[:, l] >> 0) & 3) << 4)) - 32
                q2 = ((ql[:, l + 32] & 0xF) | (((qh[:, l] >> 2) & 3) << 4)) - 32
                q3 = ((ql[:, l] >> 4) | (((qh[:, l] >> 4) & 3) << 4)) - 32
                q4 = ((ql[:, l + 32] >> 4) | (((qh[:, l] >> 6) & 3) << 4)) - 32
                y[:, l] = d * sc[:, i] * q1
                y[:, l + 32] = d * sc[:, i + 2] * q2
                y[:, l + 64] = d * sc[:, i + 4] * q3
                y[:, l + 96] = d * sc[:, i + 6] * q4
        return out.reshape(-1)
    raise NotImplementedError(f"no independent dequantizer for {qtype.name}")


# ---- model -------------------------------------------------------------------

class Model:
    def __init__(self, path, check_dequant=True):
        r = GGUFReader(path)
        self.meta = {k: f.contents() for k, f in r.fields.items()
                     if not k.startswith("tokenizer.ggml.") or k.endswith("_id")
                     or k.endswith("add_bos_token")}
        self.arch = self.meta["general.architecture"]
        self.w = {}
        self.types = {}
        self.dequant_report = {}
        for t in r.tensors:
            ne = [int(x) for x in t.shape]          # ne[0] innermost
            a32 = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32)
            a32 = a32.reshape(list(reversed(ne)))   # numpy (ne1, ne0)
            if check_dequant:
                mine = my_dequant(t.data, t.tensor_type, a32.size)
                # ggml/gguf-py dequantize in f32 arithmetic; the exact f64 value
                # rounded to f32 must agree with it to within one f32 ulp
                diff = np.abs(mine - a32.reshape(-1).astype(np.float64))
                ulp = np.spacing(np.abs(a32.reshape(-1)).astype(np.float32)).astype(np.float64)
                n_bad = int(np.count_nonzero(diff > ulp))
                n_ne = int(np.count_nonzero(diff))
                rep = self.dequant_report.setdefault(t.tensor_type.name, [0, 0, 0, 0.0])
                rep[0] += 1; rep[1] += a32.size; rep[2] += n_ne
                rep[3] = max(rep[3], float((diff / np.maximum(ulp, 1e-45)).max()))
                if n_bad:
                    sys.exit(f"make-fixtures-exact: {t.name} ({t.tensor_type.name}): "
                             f"{n_bad} values differ from the independent dequantizer by > 1 ulp")
                del mine
            self.w[t.name] = a32.astype(np.float64)
            self.types[t.name] = t.tensor_type.name
            del a32
        a = self.arch
        g = lambda k, d=None: self.meta.get(f"{a}.{k}", d)
        self.n_embd = int(g("embedding_length"))
        self.n_layer = int(g("block_count"))
        self.n_head = int(g("attention.head_count"))
        self.n_head_kv = int(g("attention.head_count_kv"))
        self.head_dim = int(g("attention.key_length", self.n_embd // self.n_head))
        self.n_rot = int(g("rope.dimension_count", self.head_dim))
        self.eps = float(g("attention.layer_norm_rms_epsilon"))
        self.freq_base = float(g("rope.freq_base", 10000.0))
        self.swa = int(g("attention.sliding_window", 0) or 0)
        if a not in ("llama", "gemma3"):
            sys.exit(f"make-fixtures-exact: unsupported architecture {a}")
        for k in ("rope.scaling.type", "rope.scaling.factor", "attn_logit_softcapping",
                  "final_logit_softcapping"):
            if f"{a}.{k}" in self.meta:
                sys.exit(f"make-fixtures-exact: {a}.{k} present; not implemented")
        self.out_name = "output.weight" if "output.weight" in self.w else "token_embd.weight"

    # -- pieces --
    def mm(self, x, name):
        """x (..., ne0) times the weight `name` (numpy (ne1, ne0)): y = W x."""
        return x @ self.w[name].T

    def rmsnorm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def gelu(self, x):
        """GELU, tanh approximation."""
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))

    def rope(self, x, pos, base, neox):
        """x (T, H, D); rotates the first n_rot dims of each head."""
        n = self.n_rot
        i = np.arange(n // 2, dtype=np.float64)
        theta = pos[:, None].astype(np.float64) * base ** (-2.0 * i / n)   # (T, n/2)
        c = np.cos(theta)[:, None, :]
        s = np.sin(theta)[:, None, :]
        y = x.copy()
        if neox:
            a, b = x[..., : n // 2], x[..., n // 2: n]
            y[..., : n // 2] = a * c - b * s
            y[..., n // 2: n] = a * s + b * c
        else:
            a, b = x[..., 0:n:2], x[..., 1:n:2]
            y[..., 0:n:2] = a * c - b * s
            y[..., 1:n:2] = a * s + b * c
        return y

    def attention(self, q, k, v, window):
        """q (T, H, D), k/v (T, Hkv, D) -> (T, H*D); causal, optional sliding window."""
        T = q.shape[0]
        qp = np.arange(T)[:, None]
        kp = np.arange(T)[None, :]
        masked = kp > qp
        if window:
            masked |= (qp - kp) >= window
        scale = 1.0 / math.sqrt(self.head_dim)
        group = self.n_head // self.n_head_kv
        out = np.empty((T, self.n_head, v.shape[2]))
        for h in range(self.n_head):
            kh = h // group
            s = (q[:, h, :] @ k[:, kh, :].T) * scale
            s[masked] = -np.inf
            s -= s.max(axis=1, keepdims=True)
            p = np.exp(s)
            p /= p.sum(axis=1, keepdims=True)
            out[:, h, :] = p @ v[:, kh, :]
        return out.reshape(T, -1)

    # -- forward: final normed hidden states (T, n_embd) --
    def hidden(self, tokens):
        W = self.w
        tok = np.asarray(tokens)
        T = len(tok)
        pos = np.arange(T)
        x = W["token_embd.weight"][tok].copy()
        gemma = self.arch == "gemma3"
        if gemma:
            x *= math.sqrt(self.n_embd)
        H, Hkv, D = self.n_head, self.n_head_kv, self.head_dim
        for il in range(self.n_layer):
            p = f"blk.{il}."
            h = self.rmsnorm(x, W[p + "attn_norm.weight"])
            q = self.mm(h, p + "attn_q.weight").reshape(T, H, D)
            k = self.mm(h, p + "attn_k.weight").reshape(T, Hkv, D)
            v = self.mm(h, p + "attn_v.weight").reshape(T, Hkv, -1)
            if gemma:
                q = self.rmsnorm(q, W[p + "attn_q_norm.weight"])
                k = self.rmsnorm(k, W[p + "attn_k_norm.weight"])
                sliding = self.swa > 0 and il % 6 < 5
                base = 10000.0 if sliding else self.freq_base
                q = self.rope(q, pos, base, neox=True)
                k = self.rope(k, pos, base, neox=True)
                a = self.attention(q, k, v, self.swa if sliding else 0)
                a = self.mm(a, p + "attn_output.weight")
                x = x + self.rmsnorm(a, W[p + "post_attention_norm.weight"])
                h = self.rmsnorm(x, W[p + "ffn_norm.weight"])
                gt = self.mm(h, p + "ffn_gate.weight")
                up = self.mm(h, p + "ffn_up.weight")
                f = self.mm(self.gelu(gt) * up, p + "ffn_down.weight")
                x = x + self.rmsnorm(f, W[p + "post_ffw_norm.weight"])
            else:
                q = self.rope(q, pos, self.freq_base, neox=False)
                k = self.rope(k, pos, self.freq_base, neox=False)
                a = self.attention(q, k, v, 0)
                x = x + self.mm(a, p + "attn_output.weight")
                h = self.rmsnorm(x, W[p + "ffn_norm.weight"])
                gt = self.mm(h, p + "ffn_gate.weight")
                up = self.mm(h, p + "ffn_up.weight")
                x = x + self.mm((gt / (1.0 + np.exp(-gt))) * up, p + "ffn_down.weight")
        return self.rmsnorm(x, W["output_norm.weight"])

    def logit_blocks(self, tokens):
        """Yields (start, logits[start:start+POS_CHUNK, :]) float64."""
        hs = self.hidden(tokens)
        for i in range(0, hs.shape[0], POS_CHUNK):
            yield i, self.mm(hs[i:i + POS_CHUNK], self.out_name)


# ---- fixtures ----------------------------------------------------------------

def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def rnd(v, d):
    r = round(float(v), d)
    assert math.isfinite(r), "non-finite value"
    return 0.0 if r == 0 else r


def write_json(path, header, flat=None, rows=None):
    """Same layout as make-fixtures.py: header fields one per line, flat arrays
    on one line each, row arrays one row per line; tmp file, parsed, renamed."""
    parts = [json.dumps(k) + ": " + json.dumps(v, ensure_ascii=False) for k, v in header.items()]
    for k, v in (flat or {}).items():
        parts.append(json.dumps(k) + ": " + json.dumps(v, ensure_ascii=False, separators=(",", ":")))
    for k, v in (rows or {}).items():
        body = ",\n  ".join(json.dumps(e, ensure_ascii=False, separators=(",", ":")) for e in v)
        parts.append(json.dumps(k) + ": [\n  " + body + "\n]")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write("{\n" + ",\n".join(parts) + "\n}\n")
    with open(path + ".tmp", encoding="utf-8") as f:
        json.load(f)
    os.replace(path + ".tmp", path)


# Fields of the llama.cpp fixture that describe llama.cpp's run, not the prompt.
LLAMA_CPP_ONLY = {"variant", "compute", "tool", "tool_version", "system_info", "n_ctx",
                  "n_batch", "dequantizer", "mean_nll", "top_k", "tokens", "lse",
                  "next_logit", "top_ids", "top_logits"}


def compare(ref, exact_logit_of, ex_top_ids, ex_top_vals, ex_lse, ex_mean_nll):
    """Agreement between a llama.cpp fixture `ref` and the exact result."""
    T = len(ref["tokens"])
    r_ids = np.array(ref["top_ids"])
    r_vals = np.array(ref["top_logits"])
    top1 = int(np.count_nonzero(r_ids[:, 0] == ex_top_ids[:, 0]))
    margin = ex_top_vals[:, 0] - ex_top_vals[:, 1]
    dis = r_ids[:, 0] != ex_top_ids[:, 0]
    ex_at_ref = exact_logit_of(r_ids)                # exact logits of llama.cpp's top-20 ids
    dlog = np.abs(ex_at_ref - r_vals)
    return {
        "n": T,
        "top1": top1,
        "top1_pct": 100.0 * top1 / T,
        "max_margin_disagree": float(margin[dis].max()) if dis.any() else 0.0,
        "max_dlogit": float(dlog.max()),
        "mean_dlogit": float(dlog.mean()),
        "max_dlse": float(np.abs(np.array(ref["lse"]) - ex_lse).max()),
        "nll_ref": float(ref["mean_nll"]),
        "nll_exact": ex_mean_nll,
        "nll_rel_pct": 100.0 * (float(ref["mean_nll"]) - ex_mean_nll) / ex_mean_nll,
    }


def run_prompt(model, common, src_path, out_path, refs):
    with open(src_path, encoding="utf-8") as f:
        src = json.load(f)
    tokens = [int(t) for t in src["tokens"]]
    T = len(tokens)
    t0 = time.time()
    top_ids = np.empty((T, TOP_K), dtype=np.int64)
    top_vals = np.empty((T, TOP_K))
    lse = np.empty(T)
    nxt = np.empty(T - 1)
    ref_ids = [np.array(r["top_ids"]) for _, r in refs]
    ref_logits = [np.empty(a.shape) for a in ref_ids]
    for i0, L in model.logit_blocks(tokens):
        n = L.shape[0]
        m = L.max(axis=1)
        lse[i0:i0 + n] = m + np.log(np.exp(L - m[:, None]).sum(axis=1))
        part = np.argpartition(-L, TOP_K + 16, axis=1)[:, :TOP_K + 16]
        for r in range(n):
            cand = part[r]
            order = np.lexsort((cand, -L[r, cand]))[:TOP_K]   # logit desc, then id asc
            top_ids[i0 + r] = cand[order]
            top_vals[i0 + r] = L[r, cand[order]]
            if i0 + r < T - 1:
                nxt[i0 + r] = L[r, tokens[i0 + r + 1]]
        for a, out in zip(ref_ids, ref_logits):
            out[i0:i0 + n] = np.take_along_axis(L, a[i0:i0 + n], axis=1)
        del L
    nll = lse[:-1] - nxt
    mean_nll = float(nll.mean()) if T > 1 else 0.0
    header = dict(common)
    for k, v in src.items():
        if k not in LLAMA_CPP_ONLY and k not in header:
            header[k] = v
    header["tokens_from"] = os.path.relpath(os.path.abspath(src_path), ROOT)
    header["top_k"] = TOP_K
    header["mean_nll"] = rnd(mean_nll, NLL_DECIMALS)
    # Smallest gap between the top-1 and top-2 exact logits over all positions:
    # how close the nearest tie is.
    header["min_top1_margin"] = rnd((top_vals[:, 0] - top_vals[:, 1]).min(), LOGIT_DECIMALS + 2)
    flat = {
        "tokens": tokens,
        "lse": [rnd(v, LOGIT_DECIMALS) for v in lse],
        "next_logit": [rnd(v, LOGIT_DECIMALS) for v in nxt],
    }
    rows = {
        "top_ids": [[int(t) for t in r] for r in top_ids],
        "top_logits": [[rnd(v, LOGIT_DECIMALS) for v in r] for r in top_vals],
    }
    write_json(out_path, header, flat, rows)
    dt = time.time() - t0
    log(f"{header['name']}: {T} tokens, mean NLL {mean_nll:.6f}, "
        f"{os.path.getsize(out_path)} bytes, {dt:.1f}s")
    results = []
    for (label, ref), a, got in zip(refs, ref_ids, ref_logits):
        c = compare(ref, lambda ids, got=got: got, top_ids, top_vals, lse, mean_nll)
        results.append((label, c))
    return results, dt


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("fixture_dir", help="the llama.cpp fixtures (make-fixtures.py) to take tokens from")
    ap.add_argument("out_dir")
    ap.add_argument("--only", default=",".join(PROMPTS))
    ap.add_argument("--no-dequant-check", action="store_true",
                    help="skip the check of gguf-py's dequantizers against the ones here")
    args = ap.parse_args()
    if not os.path.isfile(args.model):
        sys.exit(f"make-fixtures-exact: model file not found: {args.model}")
    t0 = time.time()
    model = Model(args.model, check_dequant=not args.no_dequant_check)
    log(f"{model.arch}: loaded and dequantized in {time.time() - t0:.1f}s; "
        f"LM head {model.out_name}")
    for k, (nt, nv, nne, mu) in sorted(model.dequant_report.items()):
        log(f"  dequant check {k}: {nt} tensors, {nv} values, {nne} not bit-identical "
            f"to the exact f64 value, max {mu:.2f} f32 ulp")
    md = model.meta
    common = {
        "model": None,
        "model_file": os.path.basename(args.model),
        "model_sha256": sha256_file(args.model),
        "variant": "exact",
        "compute": COMPUTE,
        "tool": TOOL,
        "numpy_version": np.__version__,
        "gguf_version": version("gguf"),
        "python_version": sys.version.split()[0],
        "n_vocab": int(model.w[model.out_name].shape[0]),
    }
    os.makedirs(args.out_dir, exist_ok=True)
    table = []
    for name in args.only.split(","):
        src = os.path.join(args.fixture_dir, name + ".json")
        if not os.path.isfile(src):
            log(f"{name}: no {src}; skipped")
            continue
        refs = []
        for label, p in (("llama.cpp", src),
                         ("llama.cpp f32", os.path.join(args.fixture_dir, "f32", name + ".json"))):
            if os.path.isfile(p):
                with open(p, encoding="utf-8") as f:
                    r = json.load(f)
                if "top_ids" in r and r.get("tokens") == (refs[0][1]["tokens"] if refs else r["tokens"]):
                    refs.append((label, r))
        with open(src, encoding="utf-8") as f:
            common["model"] = json.load(f).get("model")
        res, dt = run_prompt(model, common, src, os.path.join(args.out_dir, name + ".json"), refs)
        for label, c in res:
            table.append((name, label, c))
    print(f"\n{model.arch} ({os.path.basename(args.model)}): llama.cpp fixtures vs exact float64")
    print(f"{'prompt':<13} {'reference':<14} {'tokens':>6} {'top-1 agree':>19} "
          f"{'max margin@dis':>14} {'max|dlogit|':>11} {'mean|dlogit|':>12} {'max|dlse|':>9} "
          f"{'NLL ref':>9} {'NLL exact':>9} {'rel':>8}")
    for name, label, c in table:
        print(f"{name:<13} {label:<14} {c['n']:>6} {c['top1']:>6}/{c['n']:<5}{c['top1_pct']:>6.1f}% "
              f"{c['max_margin_disagree']:>14.4f} {c['max_dlogit']:>11.4f} {c['mean_dlogit']:>12.4f} "
              f"{c['max_dlse']:>9.4f} {c['nll_ref']:>9.5f} {c['nll_exact']:>9.5f} "
              f"{c['nll_rel_pct']:>+7.3f}%")
    log(f"total {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
