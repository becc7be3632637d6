#!/usr/bin/env python3
"""Record reference fixtures for icl from an independent implementation.

    make-fixtures.py MODEL.gguf OUTDIR [--name smollm2|gemma3] [--threads N]
                     [--ppl-text FILE] [--only logits,tokenize,perplexity]

Runs MODEL through llama-cpp-python (llama.cpp on the CPU) and writes, in
OUTDIR, one JSON file per prompt (next-token top-20 logits and log-sum-exp at
every position), tokenize.json (tokenizer-only cases) and perplexity.json.
The format and every definition are in docs/fixtures.md; keep both in step.
This script is a test oracle only: nothing in icl runs Python.
"""
import argparse
import hashlib
import json
import math
import os
import random
import sys
import time

import numpy as np
import llama_cpp
from llama_cpp import Llama

TOP_K = 20
N_CTX = 2048          # context for the prompt fixtures (the grid walk is 1401 tokens)
N_BATCH = 512
PPL_WINDOW = 512      # BOS + 511 text tokens
PPL_TEXT = "/usr/share/common-licenses/GPL-3"
LOGIT_DECIMALS = 3    # top_logits, next_logit
LSE_DECIMALS = 4      # lse

VARIANT_DOC = {
    "quant": ("llama.cpp CPU on the GGUF as shipped: quantized weights; activations "
              "quantized to the weight type's dot-product type (Q8_0/Q8_1/Q8_K) for "
              "each quantized matmul; KV cache F16"),
    "f32": ("llama.cpp CPU on a copy of the GGUF with every tensor dequantized to F32: "
            "all matmuls in F32, KV cache F32"),
}

# ---- prompts ---------------------------------------------------------------

GRID_WORDS = ["apple", "bird", "car", "egg",
              "house", "milk", "plane", "opera",
              "box", "sand", "sun", "mango",
              "rock", "math", "code", "phone"]
GRID_SIDE = 4
GRID_LEN = 1400
GRID_SEED = 0


def grid_neighbours(k):
    """4-neighbours of node k (row k//4, column k%4), ascending node id."""
    r, c = divmod(k, GRID_SIDE)
    out = []
    for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        rr, cc = r + dr, c + dc
        if 0 <= rr < GRID_SIDE and 0 <= cc < GRID_SIDE:
            out.append(rr * GRID_SIDE + cc)
    return sorted(out)


def grid_walk():
    """start = rng.randrange(16); then GRID_LEN-1 steps of rng.choice(neighbours)."""
    rng = random.Random(GRID_SEED)
    k = rng.randrange(GRID_SIDE * GRID_SIDE)
    walk = [k]
    while len(walk) < GRID_LEN:
        k = rng.choice(grid_neighbours(k))
        walk.append(k)
    return walk


CHAT_USER = "What is the capital of France, and why is it famous? Answer in two sentences."
CHAT = {
    # SmolLM2's own chat template, default system prompt included.
    "smollm2": ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, "
                "trained by Hugging Face<|im_end|>\n<|im_start|>user\n" + CHAT_USER +
                "<|im_end|>\n<|im_start|>assistant\n"),
    # Gemma 3's chat template (the tokenizer adds <bos>).
    "gemma3": ("<start_of_turn>user\n" + CHAT_USER +
               "<end_of_turn>\n<start_of_turn>model\n"),
}

CODE = '''def fib(n):
    """Return the n-th Fibonacci number."""
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a

#include <stdio.h>

int main(void) {
\tint xs[4] = {1, 22, 333, 4444};
\tfor (int i = 0; i < 4; i++)
\t\tprintf("%d: %d\\n", i, xs[i] * 2);   // doubled
\treturn 0;
}
'''

MULTILINGUAL = ("Bonjour ! Comment ça va aujourd'hui ? Très bien, merci. "
                "你好，世界！今天天气很好，我们去公园散步吧。"
                "Привет, мир! Как у тебя дела? "
                "こんにちは、世界。お元気ですか？ "
                "Straße, naïve façade, „Anführungszeichen“ — done 🙂🚀 "
                "Ελληνικά, العربية, हिन्दी 👍🏽")

PARAGRAPH = (
    "The old lighthouse stood at the edge of the cliff for more than two hundred years, "
    "watching ships come and go through storms and calm summer evenings. Its keeper, a "
    "quiet man named Thomas, climbed the one hundred and twelve steps every night to light "
    "the lamp, polish the great lens, and write a few lines in the logbook about the wind, "
    "the sea, and the vessels that passed. When the town decided to replace the lamp with "
    "an automatic beacon, many people expected Thomas to leave, but he stayed in the small "
    "cottage beside the tower and began to teach children how to read the sky. He showed "
    "them how clouds gather before rain, why the water turns grey when a storm is near, and "
    "how sailors once found their way home by following the stars. Years later, several of "
    "those children became fishermen, scientists, and captains, and each of them said that "
    "their first lesson about the world had been given at the top of that narrow staircase, "
    "in the warm light of a lamp that no longer needed anyone to tend it."
)

EXTRA_TOKENIZE = [
    ("empty", ""),
    ("space", " "),
    ("spaces", "   leading and trailing   "),
    ("hello", "Hello world"),
    ("newlines", "Hello  world\n\n\nbye\r\n"),
    ("tabs", "\t\tindented\n\tline"),
    ("digits", "1234567890 3.14159 2024-01-01 x2 10000000"),
    ("contractions", "don't I'll we've she's THEY'RE it'd"),
    ("url", "https://example.com/a/b?c=d&e=f#g"),
    ("specials_as_text", "<|im_start|> <|im_end|> <start_of_turn> <bos> <eos> <|endoftext|>"),
    ("punct", "!!!??? ... --- ((([[[{{{ }}}]]]))) @#$%^&*"),
    ("emoji", "🙂🚀👍🏽👨‍👩‍👧 ❤️"),
]


def prompts_for(name, walk):
    grid_text = " " + " ".join(GRID_WORDS[k] for k in walk)
    return [
        # (fixture name, text, parse special tokens)
        ("chat", CHAT[name], True),
        ("code", CODE, False),
        ("multilingual", MULTILINGUAL, False),
        ("paragraph", PARAGRAPH, False),
        ("grid_walk", grid_text, False),
    ]

# ---- helpers ---------------------------------------------------------------


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def feed_tokens(llm, text, special):
    """The ids fed to the model: the tokenizer's own output (add_special=True,
    so BOS only when the GGUF says add_bos_token), then BOS prepended when the
    sequence does not already start with it. Returns (ids, bos_source)."""
    bos = llm.token_bos()
    ids = llm.tokenize(text.encode("utf-8"), add_bos=True, special=special)
    plain = llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)
    if ids and ids[0] == bos and len(ids) == len(plain) + 1:
        return ids, "tokenizer"
    if ids and ids[0] == bos:
        return ids, "text"
    return [bos] + ids, "script"


def run_logits(llm, tokens):
    """All-position logits [n, n_vocab] float32 (a view into llm.scores)."""
    llm.reset()
    llm.eval(tokens)
    return llm.scores[: len(tokens), :]


def logsumexp_rows(x, rows_per_step=64):
    out = np.empty(x.shape[0], dtype=np.float64)
    for i in range(0, x.shape[0], rows_per_step):
        blk = x[i:i + rows_per_step].astype(np.float64)
        m = blk.max(axis=1)
        out[i:i + rows_per_step] = m + np.log(np.exp(blk - m[:, None]).sum(axis=1))
    return out


def top_k_rows(x, k=TOP_K, rows_per_step=64):
    """Top-k ids per row, ordered by logit descending then id ascending."""
    ids = np.empty((x.shape[0], k), dtype=np.int64)
    vals = np.empty((x.shape[0], k), dtype=np.float32)
    for i in range(0, x.shape[0], rows_per_step):
        blk = x[i:i + rows_per_step]
        part = np.argpartition(-blk, k, axis=1)[:, : k + 16]  # room for ties at the edge
        for r in range(blk.shape[0]):
            cand = part[r]
            order = np.lexsort((cand, -blk[r, cand]))[:k]
            ids[i + r] = cand[order]
            vals[i + r] = blk[r, cand[order]]
    return ids, vals


def rnd(v, d):
    r = round(float(v), d)
    assert math.isfinite(r), "non-finite logit"
    return 0.0 if r == 0 else r


def write_json(path, header, flat=None, rows=None):
    """One JSON object: header fields one per line, then each `flat` array on
    a single line, then each `rows` array (of arrays) with one row per line,
    so the files stay readable and diffable. Written to a temporary name,
    checked to parse, then renamed."""
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


# ---- the three kinds of fixtures -------------------------------------------


def make_prompt_fixture(llm, common, name, text, special, outdir, extra=None):
    tokens, bos_source = feed_tokens(llm, text, special)
    assert len(tokens) <= N_CTX, f"{name}: {len(tokens)} tokens > n_ctx {N_CTX}"
    t0 = time.time()
    logits = run_logits(llm, tokens)
    lse = logsumexp_rows(logits)
    ids, vals = top_k_rows(logits)
    nxt = [rnd(logits[i, tokens[i + 1]], LOGIT_DECIMALS) for i in range(len(tokens) - 1)]
    nll = [float(lse[i]) - float(logits[i, tokens[i + 1]]) for i in range(len(tokens) - 1)]
    header = dict(common)
    header.update({
        "name": name,
        "prompt": text,
        "parse_special": special,
        "bos_source": bos_source,
        "n_tokens": len(tokens),
        "top_k": TOP_K,
        "mean_nll": round(sum(nll) / max(1, len(nll)), 5),
    })
    if extra:
        header.update(extra)
    flat = {
        "tokens": tokens,
        "lse": [rnd(v, LSE_DECIMALS) for v in lse],
        "next_logit": nxt,
    }
    rows = {
        "top_ids": [[int(t) for t in r] for r in ids],
        "top_logits": [[rnd(v, LOGIT_DECIMALS) for v in r] for r in vals],
    }
    path = os.path.join(outdir, name + ".json")
    write_json(path, header, flat, rows)
    log(f"{name}: {len(tokens)} tokens, mean NLL {header['mean_nll']:.4f}, "
        f"{os.path.getsize(path)} bytes, {time.time() - t0:.1f}s")
    return tokens


def make_tokenize_fixture(llm, common, prompts, outdir):
    cases = []
    for name, text, _special in prompts + [(n, t, False) for n, t in EXTRA_TOKENIZE]:
        b = text.encode("utf-8")
        cases.append({
            "name": name,
            "text": text,
            "ids": llm.tokenize(b, add_bos=True, special=False),
            "ids_special": llm.tokenize(b, add_bos=True, special=True),
            "ids_no_bos": llm.tokenize(b, add_bos=False, special=False),
        })
    header = dict(common)
    header["definition"] = ("ids: llama_tokenize(text, add_special=true, parse_special=false); "
                            "ids_special: add_special=true, parse_special=true; "
                            "ids_no_bos: add_special=false, parse_special=false")
    path = os.path.join(outdir, "tokenize.json")
    write_json(path, header, rows={"cases": cases})
    log(f"tokenize: {len(cases)} cases, {os.path.getsize(path)} bytes")


def make_perplexity_fixture(llm, common, text_path, outdir):
    with open(text_path, "rb") as f:
        raw = f.read()
    stream = llm.tokenize(raw, add_bos=False, special=False)
    bos = llm.token_bos()
    chunk = PPL_WINDOW - 1
    n_windows = len(stream) // chunk
    window_nll = []
    total = 0.0
    t0 = time.time()
    for w in range(n_windows):
        toks = [bos] + stream[w * chunk:(w + 1) * chunk]
        logits = run_logits(llm, toks)
        lse = logsumexp_rows(logits)
        s = 0.0
        for i in range(PPL_WINDOW - 1):
            s += float(lse[i]) - float(logits[i, toks[i + 1]])
        window_nll.append(s / (PPL_WINDOW - 1))
        total += s
        log(f"perplexity: window {w + 1}/{n_windows} mean NLL {window_nll[-1]:.4f}")
    n_scored = n_windows * (PPL_WINDOW - 1)
    mean = total / n_scored
    header = dict(common)
    header.update({
        "text_file": text_path,
        "text_sha256": hashlib.sha256(raw).hexdigest(),
        "text_bytes": len(raw),
        "definition": (
            "stream = tokenize(file bytes, add_special=false, parse_special=false); "
            "window w (0 <= w < floor(len(stream)/511)) = [BOS] + stream[511*w : 511*(w+1)] "
            "(512 tokens, evaluated from an empty cache); in each window, positions i = 0..510 "
            "predict token i+1, NLL_i = logsumexp(logits_i) - logits_i[token_{i+1}]; the "
            "tokens after the last full window are not scored; "
            "perplexity = exp(sum NLL / n_scored)"),
        "window": PPL_WINDOW,
        "n_stream_tokens": len(stream),
        "n_windows": n_windows,
        "n_scored": n_scored,
        "mean_nll": round(mean, 6),
        "perplexity": round(math.exp(mean), 4),
        "window_mean_nll": [round(v, 6) for v in window_nll],
    })
    path = os.path.join(outdir, "perplexity.json")
    write_json(path, header, flat={"stream_tokens": stream})
    log(f"perplexity: {header['perplexity']} over {n_scored} tokens in {n_windows} windows, "
        f"{time.time() - t0:.0f}s")

# ---- main ------------------------------------------------------------------


def log(msg):
    print("make-fixtures: " + msg, file=sys.stderr, flush=True)


def guess_name(path):
    base = os.path.basename(path).lower()
    if "smollm2" in base:
        return "smollm2"
    if "gemma-3" in base or "gemma3" in base:
        return "gemma3"
    sys.exit(f"make-fixtures: cannot tell the model from '{path}': pass --name")


def dequantize_to_f32(src, dst):
    """Write a copy of GGUF `src` with every tensor dequantized to F32 (gguf-py's
    reference dequantizers) and all metadata kept; file_type set to 0 (ALL_F32)."""
    from gguf import GGUFReader, GGUFWriter, GGUFValueType as VT
    from gguf.quants import dequantize
    r = GGUFReader(src)
    w = GGUFWriter(dst + ".tmp", r.fields["general.architecture"].contents())
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key in ("general.architecture", "general.alignment"):
            continue
        if key == "general.file_type":
            w.add_key_value(key, 0, VT.UINT32)
            continue
        t = f.types[0]
        w.add_key_value(key, f.contents(), t, f.types[-1] if t == VT.ARRAY else None)
    for t in r.tensors:
        a = dequantize(t.data, t.tensor_type).astype(np.float32)
        w.add_tensor(t.name, a.reshape([int(x) for x in reversed(t.shape)]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(dst + ".tmp", dst)


def gguf_version():
    from importlib.metadata import version
    return version("gguf")


def record(llm, common, name, outdir, only, ppl_text):
    os.makedirs(outdir, exist_ok=True)
    prompts = prompts_for(name, grid_walk())
    if "logits" in only:
        for pname, text, special in prompts:
            extra = None
            if pname == "grid_walk":
                extra = {"grid_words": GRID_WORDS, "grid_side": GRID_SIDE, "walk_seed": GRID_SEED,
                         "walk_rule": "python random.Random(0): start = randrange(16); "
                                      "next = choice(sorted 4-neighbours)",
                         "walk": grid_walk()}
            make_prompt_fixture(llm, common, pname, text, special, outdir, extra)
    if "tokenize" in only:
        make_tokenize_fixture(llm, common, prompts, outdir)
    if "perplexity" in only:
        make_perplexity_fixture(llm, common, ppl_text, outdir)


def open_model(path, threads, kv_type):
    kw = {}
    if kv_type == "f32":
        kw = {"type_k": 0, "type_v": 0}  # GGML_TYPE_F32
    return Llama(model_path=path, n_ctx=N_CTX, n_batch=N_BATCH, n_ubatch=N_BATCH,
                 logits_all=True, n_threads=threads, n_threads_batch=threads,
                 n_gpu_layers=0, flash_attn=False, seed=0, verbose=False, **kw)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("outdir")
    ap.add_argument("--name", choices=["smollm2", "gemma3"])
    ap.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--ppl-text", default=PPL_TEXT)
    ap.add_argument("--only", default="logits,tokenize,perplexity")
    ap.add_argument("--variants", default="quant,f32",
                    help="quant: the file as it is; f32: weights dequantized to F32, F32 KV cache")
    ap.add_argument("--f32-cache", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                       "..", ".cache", "f32"),
                    help="where the dequantized F32 copy of the model is kept")
    args = ap.parse_args()
    name = args.name or guess_name(args.model)
    only = set(args.only.split(","))
    variants = set(args.variants.split(","))
    if not os.path.isfile(args.model):
        sys.exit(f"make-fixtures: model file not found: {args.model} (run scripts/fetch-models.sh)")
    model_sha = sha256_file(args.model)

    def common_for(llm, variant):
        md = llm.metadata
        return {
            "model": name,
            "model_file": os.path.basename(args.model),
            "model_sha256": model_sha,
            "variant": variant,
            "compute": VARIANT_DOC[variant],
            "tool": "llama-cpp-python",
            "tool_version": llama_cpp.__version__,
            "system_info": llama_cpp.llama_print_system_info().decode().strip(),
            "n_ctx": N_CTX,
            "n_batch": N_BATCH,
            "n_vocab": llm.n_vocab(),
            "bos_id": llm.token_bos(),
            "add_bos_token": {"true": True, "false": False}.get(
                md.get("tokenizer.ggml.add_bos_token"), None),
        }

    if "quant" in variants:
        log(f"{name}: variant quant")
        llm = open_model(args.model, args.threads, "f16")
        record(llm, common_for(llm, "quant"), name, args.outdir, only, args.ppl_text)
        del llm
    if "f32" in variants:
        os.makedirs(args.f32_cache, exist_ok=True)
        f32_path = os.path.join(args.f32_cache, f"{name}-{model_sha[:16]}.f32.gguf")
        if not os.path.isfile(f32_path):
            log(f"{name}: writing dequantized F32 copy {f32_path}")
            dequantize_to_f32(args.model, f32_path)
        log(f"{name}: variant f32")
        llm = open_model(f32_path, args.threads, "f32")
        common = common_for(llm, "f32")
        common["dequantizer"] = "gguf-py " + gguf_version() + " (gguf.quants.dequantize)"
        record(llm, common, name, os.path.join(args.outdir, "f32"),
               only - {"tokenize"}, args.ppl_text)


if __name__ == "__main__":
    main()
