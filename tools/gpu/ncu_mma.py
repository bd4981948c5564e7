"""ncu target (issue 8, round 4): the gate_up_proj-shaped FP8 linear at M = 1, once per variant, for
`ncu --clock-control none -k regex:'fp8_' ...`: the CUDA mma kernel (with and without its activation pass, ring depth
4 and 16) and the tuned Triton kernel. (results/ncu_mma_summary.txt was taken with the kernel's first version, a
register ring; this file drives the current one, the cp.async ring.)"""
import os, sys, torch
sys.path.insert(0, os.path.dirname(__file__))
import mma_linear as ml
from mtp_lit.kernels import fp8_linear, select_config, linear_use, quantize_fp8
N, K, M = 34816, 5120, 1
w = (torch.randn(N, K, device='cuda') * K ** -0.5).to(torch.bfloat16)
q, s = quantize_fp8(w, 'per-channel'); del w
p = ml.pack_mma(q)
x = torch.randn(M, K, device='cuda').to(torch.bfloat16)
out = torch.zeros(M, N, device='cuda')
for c in (dict(WN=8, U=8, split=16, pro=1), dict(WN=8, U=8, split=16, pro=0), dict(WN=8, U=16, split=4, pro=0)):
    ml.mma_linear(x, p, s, out=out, **c)
cfg = select_config(M, N, K, 'channel', use=linear_use(True, None))
fp8_linear(x, q, s, out=out, config=cfg); torch.cuda.synchronize()
fp8_linear(x, q, s, out=out, config=cfg); torch.cuda.synchronize()
print(cfg)
