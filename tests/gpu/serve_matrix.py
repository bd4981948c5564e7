"""The serving matrix: every draft feature of mtp_lit on real vLLM, on whatever device the engine finds.

    python tests/gpu/serve_matrix.py --out runs/serve.json [--parallel 6] [--only qwen3_5-tiny] [--no-families]

On a GPU each engine keeps vLLM's defaults (torch.compile, CUDA graphs; `mtp_lit.demo.engine_run`); on a CPU it runs
eager. Checkpoints: the two embedded trained ones (dense, MoE), their `mtp-lit quantize` conversions (per-tensor,
per-channel, 128x128 and 64x64 blocks with UE8M0 scales) and a truncated-head variant (K = V/4, counted on `head_corpus.txt`, stdlib text
fixed in the repo so that every machine builds the same ids), plus the permutation-construction checkpoint of every family in
`tests/tiny_families.py`. Runs per embedded checkpoint: plain, MTP k=3 with the BF16 draft, FP8 online (3 schemes), FP8
converted (4), FP8 + truncated head, a 16-token draft window, FP8 switched on by vLLM's own
`speculative_config.quantization='fp8'` (scheme from `--hf-overrides`), and FP8 + truncated head + window at once
(`tests/test_tp_e2e.py` serves that one at TP=2); per family: plain, BF16, FP8 online, FP8 converted.
The record names the mtp_lit commit served (`served_at`);
`tests/gpu/test_serve_gpu.py` asserts on it; `nbs/results/serve_cpu.json` is the same matrix on vLLM CPU
(embedded checkpoints only), the acceptance figures the GPU run is held to."""
import argparse, concurrent.futures as cf, json, os, platform, sys, tempfile, time
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]   # bench_served beside it; tiny_families in tests/
import tiny_families as tf
from mtp_lit.demo import RunSpec, run_in_subprocess, demo_prompts
from bench_served import plugin_commit

EMBEDDED = ('qwen3_5-tiny', 'qwen3_5_moe-tiny')
ONLINE = {'fp8-tensor': 'per-tensor', 'fp8-channel': 'per-channel', 'fp8-block': 'block'}
CONVERTED = {'conv-tensor': ('per-tensor', 'float32'), 'conv-channel': ('per-channel', 'float32'), 'conv-block-ue8m0': ('block', 'ue8m0'),
             'conv-block64-ue8m0': ('block', 'ue8m0', (64, 64))}   # 64x64 blocks: whole blocks on each rank at TP=2 too
WINDOW, HEAD_K, K, N_PROMPTS, N_TOKENS = 16, 1024, 3, 8, 64
COMBO = {'MTP_FP8': '1', 'MTP_FP8_SCHEME': 'per-channel', 'MTP_DRAFT_WINDOW': str(WINDOW)}   # the three draft features at once
NATIVE_FP8 = {'method': 'mtp', 'num_speculative_tokens': K, 'quantization': 'fp8'}   # vLLM's own switch for an FP8 draft
FAMILY_TOKENS = 24
MLA, GPU_MLA = ('deepseek_v3', 'glm4_moe_lite'), {'qk_nope_head_dim': 128, 'v_head_dim': 128}   # head dims vLLM's GPU MLA kernels take
EXPECTED_ERRORS = {'qwen3_5_moe-tiny/fp8-block': "does not divide the experts' 64 rows per projection"}   # 128x128 blocks, I = 64
NEAR_TIE = 0.05   # a first difference where plain's top-2 logprob margin is below this is a near-tie, not a wrong token

def build_checkpoints(work: Path, embedded=EMBEDDED, families=tf.FAMILIES) -> dict:
    "Write every checkpoint the matrix serves under `work`; returns {name: path}."
    from mtp_lit.model import checkpoint_path
    from mtp_lit.convert import quantize
    from mtp_lit.draft_vocab import build_draft_vocab
    out = {}
    corpus = [HERE / 'head_corpus.txt']   # the first 3 kB of 80 training-split stdlib files, fixed so every machine counts the same
    for ck in embedded:
        src = out[ck] = checkpoint_path(ck)
        for name, (scheme, fmt, *bs) in CONVERTED.items():   # the tiny MoE's experts (I = 64) stay BF16 under 128x128 blocks
            block = bs[0] if bs else (128, 128)
            out[f'{ck}/{name}'] = quantize(src, work / f'{ck}-{name}', scheme=scheme, scale_fmt=fmt, block=block, overwrite=True,
                                           progress=False, experts=not (scheme == 'block' and 'moe' in ck and block[0] > 64))
        out[f'{ck}/head'] = build_draft_vocab(src, corpus, HEAD_K, out=work / f'{ck}-head{HEAD_K}', progress=False)
    for fam in families:
        src = out[fam] = tf.build(fam, work / fam, overrides=GPU_MLA if fam in MLA else None)
        out[f'{fam}/conv-channel'] = quantize(src, work / f'{fam}-conv-channel', scheme='per-channel', overwrite=True, progress=False)
    return out

def specs(ckpts: dict, embedded=EMBEDDED, families=tf.FAMILIES) -> list:
    "The matrix as `RunSpec`s, named 'checkpoint/run'."
    P, PF = demo_prompts(N_PROMPTS), demo_prompts(2)
    def spec(name, ck, k, env, prompts=P, n=N_TOKENS, **ea): return RunSpec(name, str(ckpts[ck]), k, env, prompts, n, 1024, ea)
    out = []
    for ck in embedded:
        out += [spec(f'{ck}/plain', ck, 0, {}), spec(f'{ck}/bf16', ck, K, {})]
        out += [spec(f'{ck}/{r}', ck, K, {'MTP_FP8': '1', 'MTP_FP8_SCHEME': s}) for r, s in ONLINE.items()]
        out += [spec(f'{ck}/{r}', f'{ck}/{r}', K, {}) for r in CONVERTED]
        out += [spec(f'{ck}/fp8-head', f'{ck}/head', K, {'MTP_FP8': '1'}), spec(f'{ck}/window', ck, K, {'MTP_DRAFT_WINDOW': str(WINDOW)})]
        out += [spec(f'{ck}/native-fp8', ck, K, {}, speculative_config=NATIVE_FP8, hf_overrides={'mtp_lit': {'fp8_scheme': 'per-channel'}}),
                spec(f'{ck}/fp8-head-window', f'{ck}/head', K, {**COMBO})]
    for fam in families:
        out += [spec(f'{fam}/plain', fam, 0, {}, PF, FAMILY_TOKENS), spec(f'{fam}/bf16', fam, K, {}, PF, FAMILY_TOKENS),
                spec(f'{fam}/fp8-channel', fam, K, {'MTP_FP8': '1', 'MTP_FP8_SCHEME': 'per-channel'}, PF, FAMILY_TOKENS),
                spec(f'{fam}/conv-channel', f'{fam}/conv-channel', K, {}, PF, FAMILY_TOKENS)]
    return out

def _run(spec, log_dir):
    t0 = time.time()
    try: return spec.name, run_in_subprocess(replace(spec, name=spec.name.replace('/', '--')), log_dir=log_dir, quiet=True, timeout=1200)
    except Exception as e: return spec.name, {'error': f'{type(e).__name__}: {str(e)[:4000]}', 'total_s': time.time() - t0}

def run_all(run_specs: list, log_dir: Path, parallel: int = 1, log=print, on_result=None) -> dict:
    """Run every spec (`parallel` engines at once, each in its own process); {name: engine_run result or {'error': ...}}.
    `on_result(results so far)` is called after each run (e.g. to write a partial record)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    res = {}
    with cf.ThreadPoolExecutor(parallel) as ex:
        for name, r in ex.map(lambda s: _run(s, log_dir), run_specs):
            res[name] = r
            log(f"{name:40s} {'ERROR ' + r['error'].split('; log ')[0][-300:] if 'error' in r else 'ok'}  {r.get('total_s', 0):.0f} s", flush=True)
            if on_result: on_result(res)
    return res

def first_difference(a: list, b: list, margins: list):
    "(position, plain's top-2 margin there) of the first token where `b` differs from plain `a`, or None if identical."
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y: return i, (margins[i] if i < len(margins) else None)
    return None if len(a) == len(b) else (min(len(a), len(b)), None)

def summarize(results: dict) -> dict:
    "The committed record of a matrix run: per run acceptance, identity to plain and what the worker reports of the draft."
    out = {}
    for name, r in results.items():
        ck, run = name.rsplit('/', 1)
        base = ck.split('/')[0]
        if 'error' in r: out[name] = {'error': r['error'].split('; log ')[0][:1500]}; continue
        row = {'k': r['k'], 'env': r['env'], 'tokens_generated': r['tokens_generated'], 'wall_s': round(r['wall_s'], 3)}
        plain = results.get(f'{base}/plain')
        if r['k'] and plain and 'error' not in plain:
            diffs = [first_difference(p, t, m) for p, t, m in zip(plain['tokens'], r['tokens'], plain['margins'])]
            row['identical'] = all(d is None for d in diffs)
            row['differences'] = [[i, d[0], d[1]] for i, d in enumerate(diffs) if d is not None]
            row['wrong_tokens'] = sum(1 for d in diffs if d is not None and (d[1] is None or d[1] >= NEAR_TIE))
        if base in tf.FAMILIES and not r['k']:
            from tokenizers import Tokenizer
            from mtp_lit.model import checkpoint_path
            tok = Tokenizer.from_file(str(checkpoint_path('qwen3_5-tiny') / 'tokenizer.json'))
            row['permutation_chain'] = r['tokens'] == [tf.expected_tokens(tok.encode(p).ids, FAMILY_TOKENS) for p in demo_prompts(2)]
        if r['k']:
            a = r['acceptance']
            row['acceptance'] = {k: a[k] for k in ('drafts', 'acceptance_rate', 'mean_acceptance_length', 'per_position')}
            d = r['draft']
            dts = d['param_dtypes']
            row['draft'] = {'class': d['class'], 'device': d.get('device'), 'runner': d.get('runner'),
                            'e4m3_params': sorted(n for n, t in dts.items() if t == 'float8_e4m3fn'),
                            'linear_weight_bytes': d['linear_weight_bytes'], 'head_rows': d['head_rows'],
                            'windows': sorted(set(d['attention_windows'].values()), key=str), 'digests': d['fp8_digests'],
                            'metadata_windows': d.get('metadata_windows'), 'runner_metadata_windows': d.get('runner_metadata_windows')}
        out[name] = row
    return out

def reference_tau(embedded=EMBEDDED, heads: dict | None = None, texts: dict | None = None) -> dict:
    """τ of mtp_lit's plain-torch reference (`mtp_lit.train`, BF16) on the matrix's prompts, on this machine's device:
    {checkpoint: τ}, and {checkpoint + '/head': τ} with the draft's logits restricted to the K ids of `heads[checkpoint]`
    (a truncated-head variant directory). The texts drafted are `texts[checkpoint]` (per prompt, the token ids an engine's
    plain decoding produced: what the served drafts were verified against), else the reference's own greedy decoding.
    What the checkpoint's own weights give on those texts, whatever engine serves them."""
    import torch
    from safetensors.torch import load_file
    from tokenizers import Tokenizer
    from mtp_lit.model import load_checkpoint, checkpoint_path
    from mtp_lit.train import greedy_generate, acceptance_stats
    dev = 'cuda' if torch.cuda.is_available() else 'cpu'
    out = {}
    for ck in embedded:
        if texts is not None and ck not in texts: continue
        tok = Tokenizer.from_file(str(checkpoint_path(ck) / 'tokenizer.json'))
        m = load_checkpoint(checkpoint_path(ck), dtype=torch.bfloat16)[0].to(dev)
        ids = None
        if heads and ck in heads:
            ids = next(v for v in load_file(str(Path(heads[ck]) / 'draft_vocab.safetensors')).values() if v.dtype == torch.int64).to(dev)
        for key, keep in ((ck, None), (ck + '/head', ids)):
            if key != ck and keep is None: continue
            res = []
            for i, p in enumerate(demo_prompts(N_PROMPTS)):
                prompt = tok.encode(p).ids
                with torch.no_grad():
                    gen = texts[ck][i] if texts is not None else greedy_generate(m, prompt, N_TOKENS, 0)
                    s = torch.tensor([prompt + gen], device=dev)
                    h, _ = m(s[:, :-1])
                    logits, _ = m.mtp_chain(s[:, 1:], h, K)
                    if keep is not None:
                        off = torch.ones(logits.shape[-1], dtype=torch.bool, device=dev); off[keep] = False
                        logits = logits.masked_fill(off, float('-inf'))
                    d = logits.argmax(-1)
                acc, n = [], 1
                while n < len(gen):
                    dr, ref, a = d[0, len(prompt) + n - 2].tolist(), gen[n:n + K], 0
                    while a < min(K, len(ref)) and dr[a] == ref[a]: a += 1
                    acc.append(a); n += a + 1
                res.append({'accepted': acc})
            out[key] = acceptance_stats(res, K)['mean_acceptance_length']
    return out

WINDOWED = {'window': 'bf16', 'fp8-head-window': 'fp8-head'}   # a windowed run -> its twin without the window

def held_to(record: dict, cpu_runs: dict) -> dict:
    """{run: (τ, the τ it is held to)} for every MTP run of an embedded checkpoint in a matrix `record`. Devices break
    near-ties of the target's logits differently, so their plain texts differ, and τ with them; on the same texts the
    weights decide. So a run is held to mtp_lit's plain-torch reference drafting this record's plain texts
    (`reference_on_plain`; its truncated-head figure for a head run); a windowed run, which has no reference, to its twin's τ
    times the window's ratio on vLLM CPU (`cpu_runs`, `nbs/results/serve_cpu.json`)."""
    def tau(r): return r['acceptance']['mean_acceptance_length']
    ref, out = record['reference_on_plain'], {}
    for n, r in record['runs'].items():
        ck, run = n.split('/')[0], n.split('/')[-1]
        if ck not in ref or not r.get('k') or 'acceptance' not in r: continue
        if run in WINDOWED:
            twin = f'{ck}/{WINDOWED[run]}'
            out[n] = tau(r), tau(record['runs'][twin]) * tau(cpu_runs[n]) / tau(cpu_runs[twin])
        else: out[n] = tau(r), ref[f'{ck}/head' if 'head' in run else ck]
    return out

def kept_runs(record: dict) -> dict:
    """The runs of an earlier matrix `record`, each naming where it was served (`served_at`, `served_on`: its own, else the
    record's), so that a record merged from several keeps every run's commit and device."""
    at, on = record.get('served_at'), record['environment']['device']
    return {n: {'served_at': at, 'served_on': on, **r} for n, r in record['runs'].items()}

def environment() -> dict:
    import torch, vllm
    env = {'torch': torch.__version__, 'vllm': vllm.__version__, 'python': platform.python_version(), 'device': 'cpu'}
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        env.update(device=p.name, capability='.'.join(map(str, torch.cuda.get_device_capability(0))), cuda=torch.version.cuda,
                   mode='torch.compile + CUDA graphs (vLLM defaults)')
        try:
            import triton; env['triton'] = triton.__version__
        except ImportError: pass
    else: env['mode'] = 'eager (vLLM CPU)'
    return env

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--out', required=True, help='JSON file for the summary')
    ap.add_argument('--work', default=None, help='folder for checkpoints and logs (default: a temporary one)')
    ap.add_argument('--parallel', type=int, default=1, help='engines at once (GPU: each takes MTP_LIT_GPU_MEMORY of its memory)')
    ap.add_argument('--only', nargs='*', default=None, help='checkpoints (embedded names or families) to run; default all')
    ap.add_argument('--no-families', action='store_true', help='embedded checkpoints only')
    ap.add_argument('--no-embedded', action='store_true', help='family checkpoints only')
    ap.add_argument('--runs', nargs='*', default=None, help='only the runs whose name contains one of these')
    ap.add_argument('--merge', nargs='*', default=(), help='earlier --out files whose runs this one adds to (re-served runs replace theirs)')
    a = ap.parse_args(argv)
    work = Path(a.work or tempfile.mkdtemp(prefix='mtp_lit_serve_'))
    emb = [] if a.no_embedded else [c for c in EMBEDDED if a.only is None or c in a.only]
    fams = [] if a.no_families else [f for f in tf.FAMILIES if a.only is None or f in a.only]
    t0 = time.time()
    ck = build_checkpoints(work / 'ckpt', emb, fams)
    print(f'checkpoints built in {time.time() - t0:.0f} s', flush=True)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    env, earlier, merged = environment(), {}, [json.loads(Path(f).read_text()) for f in a.merge]
    for m in merged: earlier.update(kept_runs(m))
    last = lambda key: next((m[key] for m in merged[::-1] if m.get(key)), None)   # without embedded runs, keep a merged record's references
    ref = reference_tau(emb, {c: ck[f'{c}/head'] for c in emb}) if emb else last('reference') or {}
    here = (plugin_commit(), env['device'])
    def own(r):   # a merged run served by this commit on this device needs no `served_at`/`served_on` of its own
        return {k: v for k, v in r.items() if k not in ('served_at', 'served_on')} if (r.get('served_at'), r.get('served_on')) == here else r
    def write(res, on_plain=None):
        rec = {'environment': env, 'served_at': here[0], 'wall_s': round(time.time() - t0), 'reference': ref,
               'runs': {n: own(r) for n, r in {**earlier, **summarize(res)}.items()}}
        if on_plain or not emb and last('reference_on_plain'): rec['reference_on_plain'] = on_plain or last('reference_on_plain')
        Path(a.out).write_text(json.dumps(rec, indent=1) + '\n')
    todo = [s for s in specs(ck, emb, fams) if a.runs is None or any(r in s.name for r in a.runs)]
    res = run_all(todo, work / 'logs', a.parallel, on_result=write)
    texts = {c: res[f'{c}/plain']['tokens'] for c in emb if 'tokens' in res.get(f'{c}/plain', {})}
    write(res, reference_tau(emb, {c: ck[f'{c}/head'] for c in emb}, texts) if texts else None)
    print(f'wrote {a.out} ({time.time() - t0:.0f} s)')
    return res

if __name__ == '__main__':
    main()
