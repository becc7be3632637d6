"""Times llama.cpp (through llama-cpp-python) on one model: prefill 128 and 512 tokens, decode 128 tokens,
and a 1400-token forward with logits for every position. Prints one JSON object. Used by bench-peers.sh;
nothing of icl runs Python."""
import json
import sys
import time

from llama_cpp import Llama


def tokens(n_vocab, n):
    s, out = 12345, []
    for _ in range(n):  # the same generator as icl bench model: content does not change speed
        s = (s * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        out.append((s >> 33) % (n_vocab // 2))
    return out


def best(fn, reps):
    t = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - t0)
    return t


def main():
    path, threads, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    llm = Llama(model_path=path, n_ctx=2048, n_batch=512, n_ubatch=512, n_threads=threads,
                n_threads_batch=threads, logits_all=False, verbose=False)
    t = tokens(llm.n_vocab(), 1408)
    out = {"tool": "llama-cpp-python", "threads": threads}

    def prefill(n):
        llm.reset()
        llm.eval(t[:n])

    out["prefill_128"] = 128 / best(lambda: prefill(128), reps)
    out["prefill_512"] = 512 / best(lambda: prefill(512), reps)

    def decode():
        for i in range(128):
            llm.eval([t[8 + i]])

    dec = float("inf")
    for _ in range(reps):
        llm.reset()
        llm.eval(t[:8])
        t0 = time.perf_counter()
        decode()
        dec = min(dec, time.perf_counter() - t0)
    out["decode_128"] = 128 / dec
    del llm
    llm = Llama(model_path=path, n_ctx=2048, n_batch=512, n_ubatch=512, n_threads=threads,
                n_threads_batch=threads, logits_all=True, verbose=False)

    def forward_all():
        llm.reset()
        llm.eval(t[:1400])

    out["forward_1400_all_logits"] = 1400 / best(forward_all, reps)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
