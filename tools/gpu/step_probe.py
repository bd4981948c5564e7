"""Device-machine probe for issue 8: one Qwen3.5-27B draft step (40 960-row head) as separate kernels (`DraftStep`,
'fp8-mtp_lit') and as one persistent launch (`FusedDraftStep`) at several L2-prefetch sizes, plus the fused step's
phase costs (timing the kernel cut after phase k, k = 0..11). Run on the GPU:
`PYTHONPATH=. python3 tools/gpu/step_probe.py [--out DIR]`. Prints a table last; writes step_probe.json."""
import argparse, json, os
import torch
from mtp_lit.bench import DraftStep, FusedDraftStep, load_shapes, step_bytes, measure_bandwidth
from mtp_lit.kernels import time_graph


def timed(fn, reps=2):
    try:
        return min(time_graph([fn]) for _ in range(reps)), 'graph'
    except Exception as e:  # a cooperative launch that a graph cannot capture: time eager launches
        print('  graph capture failed:', type(e).__name__, str(e)[:200], flush=True)
        torch.cuda.synchronize()
        for _ in range(3): fn()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(50): fn()
        b.record(); b.synchronize()
        return a.elapsed_time(b) / 50, 'eager'


def main():
    ap = argparse.ArgumentParser(); ap.add_argument('--out', default=os.environ.get('OUT', '.'))
    ap.add_argument('--M', default='1,4,16'); ap.add_argument('--pf', default='0,256,1024')
    ap.add_argument('--programs', default='0', help='programs of the fused step (0: 2 per SM); comma-separated')
    ap.add_argument('--phases', action='store_true', help='also time the fused kernel cut after each phase (M=1)')
    a = ap.parse_args()
    cfg = load_shapes()['Qwen3.5-27B']
    bw = measure_bandwidth()['roofline']
    print(f'read roofline {bw / 1e12:.2f} TB/s', flush=True)
    rows = []
    for M in [int(m) for m in a.M.split(',')]:
        roof = step_bytes(cfg, M, 1, 40960)['total'] / bw * 1e3
        s = DraftStep(cfg, 'fp8-mtp_lit', 40960, 'cuda', seed=0)
        g = torch.Generator(device='cuda').manual_seed(M)
        emb = torch.randn(M, cfg['hidden_size'], device='cuda', generator=g).to(torch.bfloat16)
        hid = (torch.randn(M, cfg['hidden_size'], device='cuda', generator=g) * 4).to(torch.bfloat16)
        ids0, h0 = s(emb, hid), s.hidden(emb, hid).double()
        t, how = timed(lambda: s(emb, hid))
        rows.append(dict(M=M, variant='kernels', ms=t, roof=roof, how=how))
        print(f'M={M:3d} separate kernels          {t * 1e3:7.1f} us  frac {roof / t:.3f}', flush=True)
        for P in [int(p) for p in a.programs.split(',')]:
            for pf in [int(p) for p in a.pf.split(',')]:
                for sync in ((True, False) if pf == 0 and P == 0 else (True,)):
                    try:
                        f = FusedDraftStep(s, programs=P or None, prefetch=pf, sync=sync)
                        b = f.run(emb, hid); torch.cuda.synchronize()
                        err = ((b['xn3'].double() - h0).norm() / h0.norm()).item(); same = bool(torch.equal(b['ids'], ids0))
                        t, how = timed(lambda: f.run(emb, hid))
                    except Exception as e:
                        print(f'M={M} fused P={P} pf={pf} sync={sync}: FAILED {type(e).__name__}: {str(e)[:400]}', flush=True)
                        continue
                    name = f"fused{'' if sync else '-12launches'} P={f.P} pf={pf}"
                    rows.append(dict(M=M, variant=name, ms=t, roof=roof, how=how, rel_err=err, same_ids=same, tiles=f.tiles))
                    print(f'M={M:3d} {name:26s} {t * 1e3:7.1f} us  frac {roof / t:.3f}  ({how})  ids equal {same}  '
                          f'hidden rel err {err:.1e}  tiles {f.tiles}', flush=True)
        if a.phases and M == 1:
            f = FusedDraftStep(s, prefetch=int(a.pf.split(',')[-1]))
            prev = 0.0
            for k in range(FusedDraftStep.PHASES):
                f.PHASES = k + 1
                t, _ = timed(lambda: f.run(emb, hid), reps=1)
                rows.append(dict(M=M, variant=f'fused-upto-{k}', ms=t))
                print(f'   phases 0..{k:2d}: {t * 1e3:7.1f} us  (+{(t - prev) * 1e3:6.1f})', flush=True)
                prev = t
        del s; torch.cuda.empty_cache()
    json.dump(dict(bw=bw, rows=rows), open(os.path.join(a.out, 'step_probe.json'), 'w'), indent=1, default=str)
    print('\n| M | variant | us | fraction of roofline |')
    for r in rows:
        if 'roof' in r: print(f"| {r['M']} | {r['variant']} | {r['ms'] * 1e3:.1f} | {r['roof'] / r['ms']:.3f} |")


if __name__ == '__main__':
    main()
