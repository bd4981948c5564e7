"""Device-machine probe for issue 8, round 3: each FP8 linear of the Qwen3.5-27B draft step alone (float32 accumulate
into `out`, as in the step) against a pure read of its bytes, for the tuned config and stream-K configs (SK programs
per SM; results/linear_sk_probe.json). An earlier version also stored the weight tile-contiguous
([N/BN, K/BK, BN, BK]: results/linear_tiled_probe.json; no gain, removed).
Run on the GPU: `PYTHONPATH=. python3 tools/gpu/linear_probe.py [--out DIR]`; writes linear_probe.json."""
import argparse, json, os, math, dataclasses
import torch
from mtp_lit import _triton_kernels as tk
from mtp_lit.bench import load_shapes, measure_bandwidth, draft_linears
from mtp_lit.kernels import time_graph, fp8_linear, select_config, KernelConfig, quantize_fp8

READS = ((4096, 8, 8), (2048, 16, 4), (8192, 4, 8), (4096, 32, 8), (4096, 4, 8), (2048, 8, 4))


def main():
    ap = argparse.ArgumentParser(); ap.add_argument('--out', default=os.environ.get('OUT', '.'))
    ap.add_argument('--M', default='1,4,16')
    a = ap.parse_args()
    cfg = load_shapes()['Qwen3.5-27B']
    bw = measure_bandwidth()['roofline']
    print(f'read roofline {bw / 1e12:.2f} TB/s', flush=True)
    rows = []
    g = torch.Generator(device='cuda').manual_seed(0)
    for name, N, K in draft_linears(cfg, 40960):
        w0 = (torch.randn(N, K, device='cuda', generator=g) * K ** -0.5).to(torch.bfloat16)
        q, s = quantize_fp8(w0, 'per-channel'); del w0
        qs = [q] + [q.clone() for _ in range(2)]
        byt = N * K
        ints = [x.view(torch.int32).view(-1) for x in qs]
        t_read = min(time_graph([(lambda a=a_, c=c: tk.read_kernel[(math.ceil(a.numel() / (c[0] * c[1])),)](
            a, outs[c], a.numel(), BLOCK=c[0], ITERS=c[1], num_warps=c[2])) for a_ in ints])
            for c in READS for outs in [{c: torch.empty(math.ceil(ints[0].numel() / (c[0] * c[1])), dtype=torch.int32, device='cuda')}])
        rows.append(dict(name=name, N=N, K=K, M=0, what='read', us=t_read * 1e3, tbs=byt / t_read / 1e9))
        print(f'{name:14s} {N}x{K} read {t_read * 1e3:6.1f} us {byt / t_read / 1e9:.2f} TB/s', flush=True)
        for M in [int(m) for m in a.M.split(',')]:
            x = torch.randn(M, K, device='cuda', generator=g).to(torch.bfloat16)
            out = torch.zeros(M, N, device='cuda', dtype=torch.float32)
            base = select_config(M, N, K, 'channel')
            cands = [('tuned', base)]
            for sk in (1, 2, 3, 4):
                for bn, bk in ((64, 256), (64, 128), (128, 128)):
                    for ns in (3, 4):
                        cands.append((f'sk{sk} {bn}x{bk} s{ns}', KernelConfig(BN=bn, BK=bk, SK=sk, A8=False, WCVT=2, SWAP=False, num_stages=ns)))
                for bn, bk in ((64, 256), (128, 128)):
                    cands.append((f'sk{sk} {bn}x{bk} w8a8-swap', KernelConfig(BN=bn, BK=bk, SK=sk, A8=True, WCVT=0, SWAP=True, num_stages=4)))
            for label, c in cands:
                try:
                    ref = fp8_linear(x, qs[0], s, config=base)
                    y = fp8_linear(x, qs[0], s, config=c)
                    ok = float((y.float() - ref.float()).abs().max()) <= 0.05 * float(ref.float().abs().max())
                    t = time_graph([(lambda w=w: fp8_linear(x, w, s, out=out, config=c)) for w in qs])
                except Exception as e:
                    print(f'   M={M} {label}: {type(e).__name__} {str(e)[:120]}', flush=True); continue
                rows.append(dict(name=name, N=N, K=K, M=M, what=label, cfg=dataclasses.asdict(c), us=t * 1e3,
                                 tbs=byt / t / 1e9, ok=ok))
                print(f'   M={M:2d} {label:24s} {t * 1e3:6.1f} us {byt / t / 1e9:.2f} TB/s ok {ok}', flush=True)
        del qs, ints, q; torch.cuda.empty_cache()
    json.dump(dict(bw=bw, rows=rows), open(os.path.join(a.out, 'linear_probe.json'), 'w'), indent=1)
    print('\n| linear | M | best | us | read us |')
    for name, N, K in draft_linears(cfg, 40960):
        rd = [r for r in rows if r['name'] == name and r['M'] == 0][0]['us']
        for M in [int(m) for m in a.M.split(',')]:
            rs = [r for r in rows if r['name'] == name and r['M'] == M and r.get('ok')]
            tu = [r for r in rs if r['what'] == 'tuned']
            b = min(rs, key=lambda r: r['us'])
            print(f"| {name} | {M} | {b['what']} | {b['us']:.1f} (tuned {tu[0]['us'] if tu else float('nan'):.1f}) | {rd:.1f} |")


if __name__ == '__main__':
    main()
