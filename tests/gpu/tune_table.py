"""Re-tune the shipped `fp8_linear` table for the Qwen3.5-27B MTP linears and the 40 960-row draft head on this GPU.

    python tests/gpu/tune_table.py --level xq --out mtp_lit/data/fp8_linear_h200.json --timings nbs/bench/h200_xq_tuning.json
    python tests/gpu/tune_table.py --mode block --level neighbours --Ms 1 4 16 --out mtp_lit/data/fp8_linear_h200.json \
        --timings nbs/bench/h200_block_tuning.json

`tune_fp8_linear(level=..., keep=the current table)`: each shape and M bucket keeps its current config unless a
candidate is faster, and from `SCALED_MM_MIN_M` tokens a config is stored only where it beats vLLM's CUTLASS W8A8
(`scaled_mm_linear`), which serves those tokens otherwise. The head is tuned without split-K (its argmax epilogue needs
whole sums). The new entries are merged into the table at `--out`; the run is appended to the record `--timings` (its
'runs'): the entries it changed, and per (N, K, M, use) the 8 fastest configs timed and the baselines."""
import argparse, json, time
from dataclasses import asdict
from pathlib import Path
import torch

ROOT = Path(__file__).resolve().parents[2]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--out', required=True, help='the table to merge the new entries into (read, then written)')
    ap.add_argument('--timings', required=True)
    ap.add_argument('--level', default='xq')
    ap.add_argument('--Ms', nargs='*', type=int, default=[1, 4, 16, 64])
    ap.add_argument('--mode', default='per-channel', choices=['per-tensor', 'per-channel', 'block'], help="the weights' scales")
    a = ap.parse_args(argv)
    from mtp_lit.kernels import tune_fp8_linear, candidate_configs, tuned_table
    s27 = json.loads((ROOT / 'mtp_lit' / 'data' / 'shapes.json').read_text())['Qwen3.5-27B']
    head = (40960, s27['hidden_size'])
    shapes = [(N, K) for _, N, K in s27['mtp_linears']] + [head]
    cand = lambda M, N, K, mode: [c for c in candidate_configs(M, N, K, mode, a.level) if (N, K) != head or (c.SPLIT_K == 1 and not c.SK)]
    keep = tuned_table(a.out)
    t0 = time.time()
    res = tune_fp8_linear(shapes, a.Ms, mode=a.mode, candidates=cand, keep=keep)
    table = json.loads(Path(a.out).read_text())
    changed = {k: v for k, v in res['configs'].items() if k not in keep or asdict(keep[k]) != v}   # by config, not by the JSON's fields
    table['configs'].update(res['configs'])
    for k in res.get('cutlass', []):   # CUTLASS measured faster: an XQ entry left there would still route these tokens away from it
        if table['configs'].get(k, {}).get('XQ'): del table['configs'][k]; changed[k] = None
    Path(a.out).write_text(json.dumps(table, indent=1) + '\n')
    env = {'device': torch.cuda.get_device_name(), 'torch': torch.__version__, 'date': time.strftime('%Y-%m-%d')}
    groups = {}
    for t in res['timings']:   # configs of a.mode; cuBLAS BF16 (mode 'bf16-cublas') and CUTLASS (use 'scaled_mm') once per key
        groups.setdefault((t['N'], t['K'], t['M'], t['mode'], t.get('use', '')), []).append(t)
    top = [t for ts in groups.values() for t in sorted(ts, key=lambda t: t['ms'])[:8]]
    timed = sum(t['mode'] == a.mode and t.get('use') != 'scaled_mm' for t in res['timings'])
    rec = json.loads(Path(a.timings).read_text()) if Path(a.timings).exists() else {'about': (
        'tests/gpu/tune_table.py runs: per (N, K, M, use) the 8 fastest configs timed (ms, CUDA graphs over weight copies), '
        "cuBLAS BF16 (mode bf16-cublas) and, from SCALED_MM_MIN_M tokens, vLLM's CUTLASS W8A8 (use scaled_mm)")}
    rec.setdefault('runs', []).append({'environment': env, 'level': a.level, 'mode': a.mode, 'Ms': a.Ms, 'seconds': round(time.time() - t0, 1),
                                       'changed': changed, 'candidates_timed': timed, 'timings': top})
    Path(a.timings).write_text(json.dumps(rec, indent=1) + '\n')
    print(f'{len(changed)} entries changed in {a.out} ({time.time() - t0:.0f} s)')
    for k, v in changed.items(): print(' ', k, v)


if __name__ == '__main__':
    main()
