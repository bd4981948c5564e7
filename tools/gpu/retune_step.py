"""Device-machine run for issue 8, round 3: re-tune the Qwen3.5-27B draft step's accumulating linears (use 'acc': the
output is added into a float32 buffer, as in `DraftStep`, so split-K and stream-K cost no zero-fill or cast) over the
fine candidates plus W8A8 swap-AB and stream-K, M in {1, 4, 16}; merge the winners into the tuned table under keys
'N,K,mode,M bucket,acc' (as tune_fp8_linear writes them for use 'acc'). Run: `PYTHONPATH=. python3 tools/gpu/retune_step.py --out DIR` (writes retune_timings.json,
fp8_linear_h200.json; with --install also over mtp_lit/data/fp8_linear_h200.json)."""
import argparse, json, os, itertools, dataclasses
from mtp_lit.kernels import tune_fp8_linear, KernelConfig, _TABLE_FILE
from mtp_lit.bench import load_shapes, draft_linears

VARIANTS = {'w8a16-asm': dict(A8=False, WCVT=2, SWAP=False), 'w8a8': dict(A8=True, WCVT=0, SWAP=False),
            'w8a8-swap': dict(A8=True, WCVT=0, SWAP=True)}


def candidates(M, N, K, mode):
    out = []
    for (v, kw), (bn, bk), sk in itertools.product(VARIANTS.items(), ((64, 128), (64, 256), (128, 128)), (1, 2, 4, 8, 16)):
        if sk > 1 and K // sk < 2 * bk: continue
        for nw in ((4, 8) if v == 'w8a16-asm' else (4,)):
            out.append(KernelConfig(BN=bn, BK=bk, SPLIT_K=sk, num_warps=nw, num_stages=4, **kw))
    for v, (bn, bk), sk in itertools.product(('w8a16-asm', 'w8a8-swap'), ((128, 128), (64, 256)), (2, 3)):
        out.append(KernelConfig(BN=bn, BK=bk, SK=sk, num_stages=4, **VARIANTS[v]))
    return out


def main():
    ap = argparse.ArgumentParser(); ap.add_argument('--out', default=os.environ.get('OUT', '.'))
    ap.add_argument('--install', action='store_true'); ap.add_argument('--Ms', default='1,4,16')
    a = ap.parse_args()
    cfg = load_shapes()['Qwen3.5-27B']
    shapes = [(N, K, 'acc') for name, N, K in draft_linears(cfg, 40960) if name != 'head']
    res = tune_fp8_linear(shapes, Ms=tuple(int(m) for m in a.Ms.split(',')), candidates=candidates, level='fine',
                          baselines=False, log=lambda s: print(s, flush=True))
    json.dump(res['timings'], open(os.path.join(a.out, 'retune_timings.json'), 'w'))
    table = json.loads(_TABLE_FILE.read_text())
    table['configs'].update(res['configs'])  # keys 'N,K,mode,M bucket,acc' (tune_fp8_linear adds the use)
    table['about'] = table['about'].rstrip('.') + ('. Keys ending ",acc": the Qwen3.5-27B draft step\'s linears re-tuned '
        'for accumulation into a float32 output (tools/gpu/retune_step.py: the fine candidates plus W8A8 swap-AB and '
        'stream-K, M in {1, 4, 16}; timings in tools/gpu/results/retune_timings.json).')
    txt = json.dumps(table, indent=1)
    open(os.path.join(a.out, 'fp8_linear_h200.json'), 'w').write(txt + '\n')
    if a.install: _TABLE_FILE.write_text(txt + '\n')
    for k, c in sorted(res['configs'].items()): print(k, c)


if __name__ == '__main__':
    main()
