"""PyTorch + transformers peer of scripts/bench-park-forward.lua (benchmark only; nothing of icl runs Python).

Loads MODEL (a GGUF file) with transformers' GGUF loader, dequantized to float32, and runs each line of IDS_FILE
(one park_grid walk's token ids, written by the icl script) as one forward from an empty context, returning the
logits of every position and the hidden states (park_grid's capture is the input of layer LAYER,
hidden_states[LAYER]). Prints JSON: park_forward_s (wall seconds of all forwards, model load excluded),
the torch and transformers versions, threads.
usage: python bench_park_torch.py MODEL IDS_FILE THREADS LAYER
"""
import json
import os
import sys
import time


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    path, ids_file, threads, layer = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    import torch
    import transformers
    torch.set_num_threads(threads)
    seqs = [[int(t) for t in line.split()] for line in open(ids_file) if line.strip()]
    model = transformers.AutoModelForCausalLM.from_pretrained(
        os.path.dirname(os.path.abspath(path)), gguf_file=os.path.basename(path), torch_dtype=torch.float32)
    model.eval()
    with torch.inference_mode():
        model(input_ids=torch.tensor([seqs[0][:2]]))  # warm-up, as the icl side
        t0 = time.perf_counter()
        for s in seqs:
            out = model(input_ids=torch.tensor([s]), output_hidden_states=True, use_cache=False)
            assert out.logits.shape[1] == len(s) and out.hidden_states[layer].shape[1] == len(s)
            del out
        dt = time.perf_counter() - t0
    print(json.dumps({"park_forward_s": dt, "walks": len(seqs), "tokens": len(seqs[0]), "threads": threads,
                      "torch": torch.__version__, "transformers": transformers.__version__}))


if __name__ == "__main__":
    main()
