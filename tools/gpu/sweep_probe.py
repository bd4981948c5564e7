"""Device-machine probe for issue 8, round 3: a wide sweep of the FP8 linear's pipelining depth (num_stages), warps,
tile shape, split-K and stream-K (SK programs per SM) for the largest draft linears (head, gate_up, qkv) at M = 1, 16,
against a pure read of the same bytes. Run: `PYTHONPATH=. python3 tools/gpu/sweep_probe.py [--out DIR]`."""
import argparse, json, os, math, dataclasses, itertools
import torch
from mtp_lit import _triton_kernels as tk
from mtp_lit.bench import load_shapes, measure_bandwidth, draft_linears
from mtp_lit.kernels import time_graph, fp8_linear, select_config, KernelConfig, quantize_fp8

READS = ((4096, 8, 8), (2048, 16, 4), (8192, 4, 8), (4096, 32, 8), (4096, 4, 8), (2048, 8, 4))


def configs():
    out = []
    for (bn, bk), ns, nw, sp in itertools.product(((64, 256), (128, 128), (64, 128)), (4, 5, 6, 8), (4, 8), (1, 2)):
        out.append(KernelConfig(BN=bn, BK=bk, SPLIT_K=sp, A8=False, WCVT=2, SWAP=False, num_warps=nw, num_stages=ns))
    for (bn, bk), ns, nw, sp in itertools.product(((128, 128), (64, 256)), (4, 6, 8), (4, 8), (1, 2)):
        out.append(KernelConfig(BN=bn, BK=bk, SPLIT_K=sp, A8=True, WCVT=0, SWAP=True, num_warps=nw, num_stages=ns))
    for (bn, bk), ns, sk in itertools.product(((128, 128), (64, 256)), (4, 6, 8), (2, 3)):
        out.append(KernelConfig(BN=bn, BK=bk, A8=False, WCVT=2, SWAP=False, num_stages=ns, SK=sk))
        out.append(KernelConfig(BN=bn, BK=bk, A8=True, WCVT=0, SWAP=True, num_stages=ns, SK=sk))
    return out


def label(c):
    v = 'w8a8-swap' if c.A8 else 'w8a16'
    return f"{v} {c.BN}x{c.BK} s{c.num_stages} w{c.num_warps} " + (f"SK{c.SK}" if c.SK else f"split{c.SPLIT_K}")


def main():
    ap = argparse.ArgumentParser(); ap.add_argument('--out', default=os.environ.get('OUT', '.'))
    ap.add_argument('--M', default='1,16'); ap.add_argument('--names', default='head,gate_up_proj,qkv_proj')
    a = ap.parse_args()
    cfg = load_shapes()['Qwen3.5-27B']
    rows = []
    g = torch.Generator(device='cuda').manual_seed(0)
    for name, N, K in draft_linears(cfg, 40960):
        if name not in a.names.split(','): continue
        q, s = quantize_fp8((torch.randn(N, K, device='cuda', generator=g) * K ** -0.5).to(torch.bfloat16), 'per-channel')
        qs = [q] + [q.clone() for _ in range(2)]
        byt = N * K
        ints = [x.view(torch.int32).view(-1) for x in qs]
        t_read = 1e9
        for c in READS:
            o = torch.empty(math.ceil(ints[0].numel() / (c[0] * c[1])), dtype=torch.int32, device='cuda')
            t_read = min(t_read, time_graph([(lambda a=a_: tk.read_kernel[(o.numel(),)](a, o, a.numel(), BLOCK=c[0], ITERS=c[1], num_warps=c[2])) for a_ in ints]))
        print(f'{name} {N}x{K} read {t_read * 1e3:.1f} us', flush=True)
        rows.append(dict(name=name, M=0, what='read', us=t_read * 1e3))
        for M in [int(m) for m in a.M.split(',')]:
            x = torch.randn(M, K, device='cuda', generator=g).to(torch.bfloat16)
            out = torch.zeros(M, N, device='cuda', dtype=torch.float32)
            base = select_config(M, N, K, 'channel')
            ref = fp8_linear(x, q, s, config=base).float()
            res = []
            for c in [base] + configs():
                try:
                    y = fp8_linear(x, q, s, config=c).float()
                    ok = float((y - ref).abs().max()) <= 0.05 * float(ref.abs().max())
                    t = time_graph([(lambda w=w: fp8_linear(x, w, s, out=out, config=c)) for w in qs])
                except Exception as e:
                    continue
                lab = ('tuned ' if c is base else '') + label(c)
                res.append((t, lab, ok)); rows.append(dict(name=name, M=M, what=lab, us=t * 1e3, ok=ok, cfg=dataclasses.asdict(c)))
            res.sort()
            tuned = [r for r in res if r[1].startswith('tuned')][0]
            print(f'  M={M} tuned {tuned[0] * 1e3:.1f} us; best:', '; '.join(f'{l} {t * 1e3:.1f}{"" if ok else " BAD"}' for t, l, ok in res[:6]), flush=True)
        del qs, ints, q; torch.cuda.empty_cache()
    json.dump(rows, open(os.path.join(a.out, 'sweep_probe.json'), 'w'), indent=1)


if __name__ == '__main__':
    main()
