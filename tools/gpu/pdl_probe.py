"""Device-machine probe for issue 8, round 3: the floor of one launch per linear, measured on pure reads of the six
linears' bytes (no math, no glue), against one read of all of them; and the draft step with and without programmatic
dependent launch (PDL). Run on the GPU: `PYTHONPATH=. python3 tools/gpu/pdl_probe.py [--out DIR]`; prints a table
last and writes pdl_probe.json. Results and what was tried before: tools/gpu/NOTES.md."""
import argparse, json, os, math
import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_wait, gdc_launch_dependents
from mtp_lit import _triton_kernels as tk
from mtp_lit.bench import DraftStep, load_shapes, step_bytes, measure_bandwidth, draft_linears
from mtp_lit.kernels import time_graph

CONFIGS = ((4096, 8, 8), (2048, 16, 4), (8192, 4, 8), (4096, 32, 8), (4096, 4, 8), (2048, 8, 4))  # BLOCK, ITERS, warps


@triton.jit
def read_pdl_kernel(x_ptr, o_ptr, n, BLOCK: tl.constexpr, ITERS: tl.constexpr, WAIT: tl.constexpr):
    "read_kernel launched under PDL: WAIT 1 waits for the previous kernel first (a dependent launch, as a linear must)"
    if WAIT:
        gdc_wait()
    gdc_launch_dependents()
    pid = tl.program_id(0)
    base = pid.to(tl.int64) * BLOCK * ITERS
    acc = tl.zeros((BLOCK,), dtype=tl.int32)
    for i in range(ITERS):
        offs = base + i * BLOCK + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.store(o_ptr + pid, tl.sum(acc, axis=0))


def reader(a, cfg, pdl=None):
    BLOCK, ITERS, nw = cfg
    o = torch.empty(math.ceil(a.numel() / (BLOCK * ITERS)), dtype=torch.int32, device='cuda')
    if pdl is None: return lambda: tk.read_kernel[(o.numel(),)](a, o, a.numel(), BLOCK=BLOCK, ITERS=ITERS, num_warps=nw)
    return lambda: read_pdl_kernel[(o.numel(),)](a, o, a.numel(), BLOCK=BLOCK, ITERS=ITERS, WAIT=pdl, num_warps=nw,
                                                 launch_pdl=True)


def floor(cfg, bw, rows):
    sizes = [N * K for _, N, K in draft_linears(cfg, 40960)]
    bufs = [torch.ones(s // 4, dtype=torch.int32, device='cuda') for s in sizes]
    allb = torch.ones(sum(sizes) // 4, dtype=torch.int32, device='cuda')
    roof = sum(sizes) / bw * 1e3
    t_one = min(time_graph([reader(allb, c)]) for c in CONFIGS)
    best = []  # the best config of each read alone
    for b in bufs:
        ts = [(time_graph([reader(b, c)]), c) for c in CONFIGS]
        best.append(min(ts)[1])
    res = {'one read of all bytes (best config)': t_one}
    for name, pdl in (('six reads, each its best config', None), ('six reads under PDL, each waiting for the previous', 1),
                      ('six reads under PDL, not waiting (no dependency: an upper bound)', 0)):
        fns = [reader(b, c, pdl) for b, c in zip(bufs, best)]
        res[name] = min(time_graph([lambda fs=fns: [f() for f in fs]]) for _ in range(3))
    for name, t in res.items():
        rows.append(dict(M=0, variant=name, ms=t, roof=roof))
        print(f'{name}: {t * 1e3:.1f} us frac {roof / t:.3f}', flush=True)
    print('best configs', best, 'sizes MB', [s / 1e6 for s in sizes], flush=True)
    del bufs, allb; torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(); ap.add_argument('--out', default=os.environ.get('OUT', '.'))
    ap.add_argument('--M', default='1,4,16'); ap.add_argument('--no-floor', action='store_true')
    a = ap.parse_args()
    cfg = load_shapes()['Qwen3.5-27B']
    bw = measure_bandwidth()['roofline']
    print(f'read roofline {bw / 1e12:.2f} TB/s', flush=True)
    rows = []
    if not a.no_floor: floor(cfg, bw, rows)
    for M in [int(m) for m in a.M.split(',')]:
        roof = step_bytes(cfg, M, 1, 40960)['total'] / bw * 1e3
        s = DraftStep(cfg, 'fp8-mtp_lit', 40960, 'cuda', seed=0)
        g = torch.Generator(device='cuda').manual_seed(M)
        emb = torch.randn(M, cfg['hidden_size'], device='cuda', generator=g).to(torch.bfloat16)
        hid = (torch.randn(M, cfg['hidden_size'], device='cuda', generator=g) * 4).to(torch.bfloat16)
        s.pdl = False
        ids0 = s(emb, hid); h0 = s.hidden(emb, hid).float()
        for pdl in (False, True) * 3:  # interleaved: drift shows
            s.pdl = pdl
            ids = s(emb, hid); h = s.hidden(emb, hid).float()
            same = bool(torch.equal(ids, ids0)); err = float((h - h0).abs().max() / h0.abs().max())
            t = min(time_graph([lambda: s(emb, hid)]) for _ in range(2))
            rows.append(dict(M=M, variant=f'step, pdl {pdl}', ms=t, roof=roof, same_ids=same, rel_err=err))
            print(f'M={M:3d} step pdl {pdl}: {t * 1e3:7.1f} us  frac {roof / t:.3f}  ids equal {same} rel err {err:.1e}', flush=True)
        del s; torch.cuda.empty_cache()
    json.dump(dict(bw=bw, rows=rows), open(os.path.join(a.out, 'pdl_probe.json'), 'w'), indent=1, default=str)
    print('\n| M | variant | us | fraction of roofline |')
    for r in rows: print(f"| {r['M']} | {r['variant']} | {r['ms'] * 1e3:.1f} | {r['roof'] / r['ms']:.3f} |")


if __name__ == '__main__':
    main()
