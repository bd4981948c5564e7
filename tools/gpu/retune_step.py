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


def candidates(M, N, K, mode, wide=False, tma=False):
    """The fine candidates plus W8A8 swap-AB and stream-K; wide: also 2 and 3 stages (less shared memory per program,
    so more programs per SM) for W8A16-asm and W8A8 swap-AB, with stream-K at 2-4 programs per SM; tma: each W8A8
    swap-AB and W8A16-asm candidate also with its weight tiles through a TMA descriptor."""
    out = []
    for (v, kw), (bn, bk), sk in itertools.product(VARIANTS.items(), ((64, 128), (64, 256), (128, 128)), (1, 2, 4, 8, 16)):
        if sk > 1 and K // sk < 2 * bk: continue
        for nw in ((4, 8) if v == 'w8a16-asm' else (4,)):
            for ns in ((2, 3, 4) if wide and v != 'w8a8' and nw == 4 else (4,)):
                out.append(KernelConfig(BN=bn, BK=bk, SPLIT_K=sk, num_warps=nw, num_stages=ns, **kw))
    for v, (bn, bk), sk in itertools.product(('w8a16-asm', 'w8a8-swap'), ((128, 128), (64, 256)), ((2, 3, 4) if wide else (2, 3))):
        for ns in ((2, 3, 4) if wide else (4,)):
            out.append(KernelConfig(BN=bn, BK=bk, SK=sk, num_stages=ns, **VARIANTS[v]))
    if tma:
        out += [dataclasses.replace(c, TMA=True) for c in out if c.SWAP or not c.A8]
    return out


def main():
    ap = argparse.ArgumentParser(); ap.add_argument('--out', default=os.environ.get('OUT', '.'))
    ap.add_argument('--install', action='store_true'); ap.add_argument('--Ms', default='1,4,16')
    ap.add_argument('--wide', action='store_true', help='also 2 and 3 stages, stream-K up to 4 per SM')
    ap.add_argument('--head', action='store_true', help="also the 40 960-row head (use '': split-K 1, as its argmax needs)")
    ap.add_argument('--tma', action='store_true', help='also every W8A8 swap-AB / W8A16-asm candidate with TMA weight loads')
    a = ap.parse_args()
    cfg = load_shapes()['Qwen3.5-27B']
    shapes = [(N, K, 'acc') for name, N, K in draft_linears(cfg, 40960) if name != 'head']
    if a.head: shapes.append((40960, cfg['hidden_size'], ''))
    def cands(M, N, K, mode):
        cs = candidates(M, N, K, mode, a.wide, a.tma)
        return [c for c in cs if c.SPLIT_K == 1 and not c.SK] if N == 40960 else cs
    res = tune_fp8_linear(shapes, Ms=tuple(int(m) for m in a.Ms.split(',')), candidates=cands, level='fine',
                          baselines=False, log=lambda s: print(s, flush=True))
    json.dump(res['timings'], open(os.path.join(a.out, 'retune_timings.json'), 'w'), default=str)
    table = json.loads(_TABLE_FILE.read_text())
    table['configs'].update(res['configs'])  # keys 'N,K,mode,M bucket,acc' (tune_fp8_linear adds the use)
    base = table['about'].split('. Keys ending ",acc"')[0].rstrip('.')
    table['about'] = base + ('. Keys ending ",acc": the Qwen3.5-27B draft step\'s linears re-tuned for accumulation into '
        'a float32 output (tools/gpu/retune_step.py' + (' --wide' if a.wide else '') + (' --head' if a.head else '') +
        (' --tma' if a.tma else '') + ': the fine candidates plus W8A8 swap-AB and stream-K' + (', 2-4 stages' if a.wide else '')
        + (', each also with TMA weight loads' if a.tma else '') + ', M in {1, 4, 16}'
        + ('; the 40 960-row head re-tuned the same way, plain keys' if a.head else '') +
        '; timings in tools/gpu/results/retune_timings.json).')
    txt = json.dumps(table, indent=1)
    open(os.path.join(a.out, 'fp8_linear_h200.json'), 'w').write(txt + '\n')
    if a.install: _TABLE_FILE.write_text(txt + '\n')
    for k, c in sorted(res['configs'].items()): print(k, c)


if __name__ == '__main__':
    main()
