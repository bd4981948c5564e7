"""Device-machine probe for issue 8: one Qwen3.5-27B draft step (40 960-row head) as `DraftStep` ('fp8-mtp_lit',
separate kernels) with its RMSNorm / SiluAndMul kernels at several num_warps, and (--fused) the one-launch experiment
`tools/gpu/fused_step.py`. Run on the GPU: `PYTHONPATH=. python3 tools/gpu/step_probe.py [--out DIR]`; prints a table
last and writes step_probe.json. Results and what was tried before: tools/gpu/NOTES.md."""
import argparse, json, os, sys
import torch
import mtp_lit.bench as B
from mtp_lit.bench import DraftStep, load_shapes, step_bytes, measure_bandwidth
from mtp_lit.kernels import time_graph


def main():
    ap = argparse.ArgumentParser(); ap.add_argument('--out', default=os.environ.get('OUT', '.'))
    ap.add_argument('--M', default='1,4,16'); ap.add_argument('--warps', default='4,8,16')
    ap.add_argument('--fused', action='store_true', help='also time tools/gpu/fused_step.py (one persistent launch)')
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
        ids0 = s(emb, hid)
        for w in [int(x) for x in a.warps.split(',')]:
            B._GLUE_WARPS = w
            same = bool(torch.equal(s(emb, hid), ids0))
            t = min(time_graph([lambda: s(emb, hid)]) for _ in range(2))
            rows.append(dict(M=M, variant=f'kernels, glue warps {w}', ms=t, roof=roof, same_ids=same))
            print(f'M={M:3d} kernels, glue num_warps {w:2d}: {t * 1e3:7.1f} us  frac {roof / t:.3f}  ids equal {same}', flush=True)
        B._GLUE_WARPS = 16
        if a.fused:
            sys.path.insert(0, os.path.dirname(__file__))
            from fused_step import FusedDraftStep
            for sync in (True, False):
                f = FusedDraftStep(s, sync=sync, prefetch=0)
                same = bool(torch.equal(f(emb, hid), ids0))
                t = time_graph([lambda: f.run(emb, hid)])
                rows.append(dict(M=M, variant=f"one launch{'' if sync else ' as 12'}", ms=t, roof=roof, same_ids=same))
                print(f"M={M:3d} fused{'' if sync else ' (12 launches)'}: {t * 1e3:7.1f} us  frac {roof / t:.3f}  ids equal {same}", flush=True)
        del s; torch.cuda.empty_cache()
    json.dump(dict(bw=bw, rows=rows), open(os.path.join(a.out, 'step_probe.json'), 'w'), indent=1, default=str)
    print('\n| M | variant | us | fraction of roofline |')
    for r in rows: print(f"| {r['M']} | {r['variant']} | {r['ms'] * 1e3:.1f} | {r['roof'] / r['ms']:.3f} |")


if __name__ == '__main__':
    main()
