import numpy as np
rng=np.random.default_rng(1)
def bf16(a):
    a=np.asarray(a,dtype=np.float32); u=a.view(np.uint32)
    r=((u + 0x7FFF + ((u>>16)&1)) & 0xFFFF0000).astype(np.uint32)
    return r.view(np.float32)
for (n,K,R) in [(1152,128,128),(8192,256,256)]:
    x=rng.standard_normal((n,K)).astype(np.float32); W=(0.02*rng.standard_normal((R,K))).astype(np.float32); dy=(rng.standard_normal((n,R))*1e-3).astype(np.float32)
    ref=dy.astype(np.float64).T@x.astype(np.float64)
    f32=(dy.T@x).astype(np.float64)
    b=(bf16(dy).astype(np.float64).T@bf16(x).astype(np.float64))
    rel=lambda g: np.abs(g-ref).max()/np.abs(ref).max()
    print(f"dW {n}x{K}x{R}: f32 {rel(f32):.2e}  bf16 operands, f32+ accumulation {rel(b):.2e}")
