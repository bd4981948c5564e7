"""The served draft, benchmarked inside vLLM on a GPU at real shapes: random weights (`--load-format dummy`), vLLM's defaults.

    python tests/gpu/bench_served.py --out nbs/bench/h200_served.json [--models Qwen3.5-27B] [--drafts bf16 fp8 fp8-head]
        [--ks 3] [--batches 1 4 16 64] [--targets bf16 fp8] [--profile 1 16]
    python tests/gpu/bench_served.py --out nbs/bench/h200_served.json --runs Qwen3.5-27B/fp8-target/fp8-head/k3 Qwen3.5-27B/bf16-target/fp8/k2

Each engine serves a real checkpoint's `config.json` (`tests/fixtures/checkpoints`, verbatim; the multimodal Qwen3.5 classes
with `language_model_only`, Gated DeltaNet prefill by vLLM's Triton kernels) with random weights, torch.compile and
CUDA graphs. Per engine (one target × draft × k), for each batch size B: B sequences of `--prompt` random token ids decode
`--tokens` tokens (EOS ignored), after a warm-up of the same length; short (8 tokens) and long (8 + `--tokens`), the faster
of two repeats each; the difference over the difference in decode steps is the time of
one decode step (the target's verify of k+1 tokens per sequence + the draft's k proposals + vLLM's scheduling). The
draft's share is timed inside the worker: CUDA events around every call of the runner's proposer
(`DraftInspector.mtp_lit_time_draft`), median over the long run's steps; the target's forward the same way around the
runner's `_model_forward` (`mtp_lit_time_target`), median over the timed runs' forwards of B·(k+1) tokens as vLLM pads them
(the verify; `padded` with the engine's CUDA-graph sizes); the step minus the two is vLLM's own work around them (scheduling, sampling, inputs).
The step is also timed one at a time in the worker (`worker_step_ms`: a CUDA event at the start of every `execute_model`,
`DraftInspector.mtp_lit_time_steps`; median over the timed runs' steps of B requests and B(k+1) tokens, start to the next
step's start: no prefill chunk enters; `worker_steps` keeps every period, per timed decode).
Random weights accept almost no draft token, so every step emits one token per sequence; decode speed at a real acceptance
length τ is τ / step time (the benchmark page).
Drafts: `bf16` (vLLM's own), `fp8` (mtp_lit online FP8, per-channel), `fp8-head` (+ a draft head of `--head-rows` rows),
`fp8-head-window` (+ a 2048-token draft window), `fp8-head-nopdl` (`fp8-head` with MTP_LIT_PDL=0: without programmatic
dependent launch), `fp8-head-nogemv` (`fp8-head` with MTP_LIT_MOE_GEMV_MAX_M=0: a MoE draft's routed experts by vLLM's fused MoE
at every token count), `fp8-head-noskip` (`fp8-head` with MTP_LIT_MOE_SKIP_PADDING=0: the GEMV launches also compute
vLLM's CUDA-graph padding rows); these three only when named. Targets: `bf16`, `fp8` (vLLM's online `quantization='fp8'`). One record holds
one `--prompt` (`nbs/bench/h200_served.json`: 512; `h200_served_8k.json`: 8192, where the 2048-token window binds) and one
machine (GPU, vLLM, torch); `--out` adds to it, an engine it re-serves replacing its run (the replaced one kept under `earlier`)."""
import argparse, json, os, re, subprocess, sys, tempfile, time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CONFIGS = ROOT / 'tests' / 'fixtures' / 'checkpoints'   # real checkpoints' metadata: NAME/config.json
FP8 = {'MTP_FP8': '1', 'MTP_FP8_SCHEME': 'per-channel'}
DRAFTS = {'bf16': {}, 'fp8': FP8, 'fp8-head': FP8, 'fp8-head-window': FP8 | {'MTP_DRAFT_WINDOW': '2048'},   # 'head': + the draft vocabulary
          'fp8-head-nopdl': FP8 | {'MTP_LIT_PDL': '0'},   # mtp_lit's kernels without programmatic dependent launch (`kernels.served_pdl`)
          'fp8-head-nogemv': FP8 | {'MTP_LIT_MOE_GEMV_MAX_M': '0'},   # routed experts by vLLM's fused MoE at every token count (`kernels.moe_gemv_max_m`)
          'fp8-head-noskip': FP8 | {'MTP_LIT_MOE_SKIP_PADDING': '0'}}   # the GEMV launches also compute vLLM's padding rows (`draft_moe.padding_rows`)
OUTSIDE_SWEEP = ('fp8-head-nopdl', 'fp8-head-nogemv', 'fp8-head-noskip')   # comparison drafts, served only when named
# speculative_config options per draft: a truncated head gives vLLM's proposer its token directly (vLLM's own option; the
# FP8 head's argmax kernel, no vocabulary-wide logits), as the plugin page tells users to serve it
SPEC_OPTS = {d: {'use_local_argmax_reduction': True} for d in DRAFTS if 'head' in d}
PROFILE_TOKENS = 16   # decode steps profiled (`--profile`): a profiled decode of 8 + 16 tokens minus one of 8, so the prefill cancels
COLD_S = 340   # a model's first engine on a machine, H200: ~230 s start (Triton kernels compiled and autotuned) + ~100 s timed
CAPTURE = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 320]   # CUDA-graph batch sizes: every B × (k+1) of the sweep

def served_dir(name: str, out: Path, head_rows: int = 0) -> Path:
    """A weightless model directory vLLM serves with `--load-format dummy`: `CONFIGS/name/config.json` as the
    checkpoint has it, and with `head_rows` a draft vocabulary of the first `head_rows` token ids (ids only: no weights are read)."""
    from safetensors.torch import save_file
    import torch
    tc = json.loads((CONFIGS / name / 'config.json').read_text())
    out.mkdir(parents=True, exist_ok=True)
    if head_rows:
        tc['mtp_lit'] = {'draft_vocab_size': head_rows, 'draft_vocab_file': 'draft_vocab.safetensors'}
        from mtp_lit.draft_vocab import draft_vocab_tensor_names
        save_file({draft_vocab_tensor_names(tc)[0]: torch.arange(head_rows, dtype=torch.int64)}, str(out / 'draft_vocab.safetensors'))
    (out / 'config.json').write_text(json.dumps(tc, indent=1))
    return out

def _kernel_difference(short: list, long: list) -> list:
    s = {n: (c, t) for n, c, t in short}
    rows = [[n, c - s.get(n, (0, 0.0))[0], t - s.get(n, (0, 0.0))[1]] for n, c, t in long]
    return sorted((r for r in rows if r[1] > 0), key=lambda r: -r[2])

def profile_difference(short: dict, long: dict, top: int = 30) -> dict:
    """`long` minus `short`, two `DraftInspector.mtp_lit_profile` results: the kernels of the decode steps between them, and
    under 'draft' those inside the draft proposer's calls (`mtp_lit.demo.draft_kernels`), all of them."""
    out = {'wall_ms': long['wall_ms'] - short['wall_ms'], 'gpu_ms': long['gpu_ms'] - short['gpu_ms'],
           'kernels': _kernel_difference(short['kernels'], long['kernels'])[:top], 'method': 'long minus short'}
    if 'draft' in long and 'draft' in short:
        a, b = short['draft'], long['draft']
        out['draft'] = {k: b[k] - a[k] for k in ('ranges', 'range_ms', 'gpu_ms')} | {'kernels': _kernel_difference(a['kernels'], b['kernels'])}
    return out

def _decode(llm, prompts, n):
    "Wall seconds to decode `n` tokens for every prompt, and vLLM's spec-decode draft count over that call."
    from vllm import SamplingParams
    def drafts(): return sum(int(getattr(m, 'value', 0) or 0) for m in llm.get_metrics() if m.name == 'vllm:spec_decode_num_drafts')
    d0, t0 = drafts(), time.perf_counter()
    llm.generate(prompts, SamplingParams(temperature=0, max_tokens=n, ignore_eos=True, detokenize=False), use_tqdm=False)
    return time.perf_counter() - t0, drafts() - d0

def spread(xs: list) -> list | None:
    "[10th percentile, 90th percentile, count] of the timed calls behind a median (None for fewer than two): a skewed spread shows when medians need not add up to a step."
    from statistics import quantiles
    if len(xs) < 2: return None
    q = quantiles(xs, n=10, method='inclusive')
    return [q[0], q[-1], len(xs)]

def padded(tokens: int, graph_sizes: list) -> int:
    "The tokens a forward of `tokens` runs on: the smallest of vLLM's CUDA-graph sizes (`graph_sizes`) that holds it, else `tokens` (eager, or past the largest)."
    return min((s for s in graph_sizes if s >= tokens), default=tokens)

def engine_bench(model: str, k: int, target: str, batches: list, prompt: int, tokens: int, profile: list = (), spec_opts: dict = None) -> dict:
    "One engine (vLLM imported here): decode-step and draft-step times for each batch size; see the module docstring."
    import torch
    from statistics import median
    from vllm import LLM
    from vllm.inputs import TokensPrompt
    B = max(batches)
    args = dict(model=model, load_format='dummy', skip_tokenizer_init=True, dtype='bfloat16', seed=0, enable_prefix_caching=False,
                max_model_len=prompt + 2 * tokens + 64, max_num_seqs=B, max_num_batched_tokens=max(2048, B * (k + 1)),
                gpu_memory_utilization=float(os.environ.get('MTP_LIT_GPU_MEMORY', '0.9')), disable_log_stats=False,
                compilation_config={'cudagraph_capture_sizes': [s for s in CAPTURE if s <= B * (k + 1)]},
                worker_extension_cls='mtp_lit.demo.DraftInspector')
    cfg = json.loads((Path(model) / 'config.json').read_text())
    if 'vision_config' in cfg: args['language_model_only'] = True   # text decoding: no vision tower, no processor
    if torch.cuda.is_available() and 'linear_attention' in (cfg.get('text_config', cfg).get('layer_types') or ()):
        args['gdn_prefill_backend'] = 'triton'   # Gated DeltaNet prefill without FlashInfer (not in the GPU image here)
    if k: args['speculative_config'] = {'method': 'mtp', 'num_speculative_tokens': k} | (spec_opts or {})
    if target == 'fp8': args['quantization'] = 'fp8'
    if not torch.cuda.is_available():   # vLLM CPU (a check of this script): eager, a small KV cache
        args.update(enforce_eager=True); args.pop('compilation_config'); args.pop('gpu_memory_utilization')
    t0 = time.perf_counter()
    llm = LLM(**args)
    res = {'start_s': round(time.perf_counter() - t0, 1), 'batches': {}}
    if k:
        d = llm.collective_rpc('mtp_lit_inspect_draft')[0]
        res['draft'] = {'e4m3_params': sum(t == 'float8_e4m3fn' for t in d['param_dtypes'].values()), 'head_rows': d['head_rows'],
                        'windows': sorted(set(d['attention_windows'].values()), key=str), 'linear_weight_bytes': d['linear_weight_bytes']}
        res['draft']['pdl'] = bool(d.get('pdl')) and res['draft']['e4m3_params'] > 0   # mtp_lit's FP8 ops launched under PDL
        res['graph_sizes'] = d.get('graph_sizes')   # after vLLM's rounding to multiples of k + 1: what each pass is padded to
        res['kv_cache_groups'] = d.get('kv_cache_groups')   # [spec type, layers] per group: the per-step work of a hybrid model grows with them
        res['metadata_windows'] = d.get('metadata_windows')   # the window each of the proposer's metadata builders for the draft applies
        res['runner_metadata_windows'] = d.get('runner_metadata_windows')   # and the model runner's builders for groups holding a draft layer
        llm.collective_rpc('mtp_lit_time_draft', args=('start',))
    timed_target = llm.collective_rpc('mtp_lit_time_target', args=('start',))[0]   # False on a runner without _model_forward
    llm.collective_rpc('mtp_lit_time_steps', args=('start',))
    g = torch.Generator().manual_seed(0)
    V = llm.llm_engine.model_config.get_vocab_size()
    for b in batches:
        ps = [TokensPrompt(prompt_token_ids=torch.randint(0, V, (prompt,), generator=g).tolist()) for _ in range(b)]
        _decode(llm, ps, 8 + tokens)   # warm-up over every position the timed runs reach: graphs, Triton kernels, JIT
        llm.collective_rpc('mtp_lit_time_target', args=('read',))   # the warm-up's forwards are not timed ones
        llm.collective_rpc('mtp_lit_time_steps', args=('read',))
        def timed(n):   # a timed decode, and the worker's periods of its steps of all b sequences (b requests, b (k+1) tokens)
            return _decode(llm, ps, n), [ms for ms, s in llm.collective_rpc('mtp_lit_time_steps', args=('read',))[0] if s == [b * (k + 1), b]]
        runs = [timed(n) for _ in range(2) for n in (8, 8 + tokens)]   # short, long, short, long
        short, long = [r for r, _ in runs[0::2]], [r for r, _ in runs[1::2]]
        (ts, ds), (tl, dl) = min(short), min(long)   # the faster of two repeats: a stray host stall is not a step time
        row = {'decode_s': tl - ts}
        if k:
            calls = llm.collective_rpc('mtp_lit_time_draft', args=('read',))[0]
            steps = (dl - ds) / b   # drafts are counted per sequence and step
            row |= {'steps': steps, 'step_ms': 1e3 * (tl - ts) / steps, 'draft_ms': median(calls[-int(steps):]) if calls else None,
                    'draft_spread': spread(calls[-int(steps):]),
                    'tokens_per_step': tokens / steps}
        else: row |= {'steps': tokens, 'step_ms': 1e3 * (tl - ts) / tokens}
        row['tokens_per_s'] = b * tokens / (tl - ts)
        nv = padded(b * (k + 1), res.get('graph_sizes') or [])   # the verify's B (k+1) tokens, as vLLM pads them
        verify = [ms for ms, m in llm.collective_rpc('mtp_lit_time_target', args=('read',))[0] if m == nv]
        row['target_ms'], row['target_tokens'] = (median(verify) if timed_target and verify else None), nv
        row['target_spread'] = spread(verify) if timed_target else None
        # the step timed in the worker, one at a time: start of a decode step of all b sequences to the next step's start
        periods = [ms for _, p in runs for ms in p]
        row['worker_step_ms'], row['worker_step_spread'] = (median(periods), spread(periods)) if periods else (None, None)
        row['worker_steps'] = [[round(ms, 3) for ms in p] for _, p in runs]   # per timed decode, in order: two modes would show here
        if b in profile:   # where the GPU time of PROFILE_TOKENS decode steps goes: a profiled long decode minus a short one
            prof = []
            for n in (8, 8, 8 + PROFILE_TOKENS):   # the first is thrown away: a profiler's first start stretches the run it profiles
                llm.collective_rpc('mtp_lit_profile', args=('start',))
                _decode(llm, ps, n)
                prof.append(llm.collective_rpc('mtp_lit_profile', args=('stop', 100_000))[0])
            row['profile'] = profile_difference(*prof[1:]) | {'tokens': PROFILE_TOKENS}
            if k: llm.collective_rpc('mtp_lit_time_draft', args=('read',))
            llm.collective_rpc('mtp_lit_time_target', args=('read',)); llm.collective_rpc('mtp_lit_time_steps', args=('read',))
        res['batches'][str(b)] = row
        print(f'  B={b:3d} step {row["step_ms"]:.3f} ms' + (f', draft {row["draft_ms"]:.3f} ms' if row.get('draft_ms') else '')
              + (f', target {row["target_ms"]:.3f} ms' if row['target_ms'] else ', target not timed')
              + (f', worker step {row["worker_step_ms"]:.3f} ms' if row['worker_step_ms'] else ''), flush=True)
    return res

START_LINES = {'load_s': r'Model loading took [\d.]+ GiB (?:memory )?and ([\d.]+) seconds',   # vLLM's start-up log lines (0.26 ... 0.32; GPU)
               'init_model_s': r'Initializing model took ([\d.]+) seconds',   # vLLM CPU 0.32
               'compile_s': r'torch\.compile took ([\d.]+) s in total', 'graphs_s': r'Graph capturing finished in ([\d.]+) secs',
               'init_engine_s': r'init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s'}

def start_breakdown(log: str) -> dict:
    "Where an engine's start-up went, from vLLM's log: every match of each `START_LINES` pattern, in seconds (target first, then draft, where vLLM logs both)."
    return {k: [float(v) for v in re.findall(pat, log)] for k, pat in START_LINES.items()}

def plugin_commit() -> str | None:
    "The commit of the checkout this benchmark runs from (its mtp_lit): git's, else the environment's MTP_LIT_COMMIT (a copy without .git), else None."
    p = subprocess.run(['git', '-C', str(ROOT), 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True)
    return p.stdout.strip() or os.environ.get('MTP_LIT_COMMIT') or None

def kernel_table_hash(path=None) -> str:
    "The first 12 hex digits of the sha1 of the configs in the tuned kernel table the installed mtp_lit loads (`mtp_lit/data/fp8_linear_h200.json`)."
    import hashlib, mtp_lit.kernels as mk
    configs = json.loads(Path(path or mk._TABLE_FILE).read_text())['configs']
    return hashlib.sha1(json.dumps(configs, sort_keys=True).encode()).hexdigest()[:12]

def environment() -> dict:
    import torch, vllm
    p = torch.cuda.get_device_properties(0) if torch.cuda.is_available() else None
    return {'torch': torch.__version__, 'vllm': vllm.__version__, 'device': p.name if p else 'cpu', 'cuda': torch.version.cuda,
            'mode': 'torch.compile + CUDA graphs (vLLM defaults)' if p else 'eager (vLLM CPU)',
            'VLLM_USE_V2_MODEL_RUNNER': os.environ.get('VLLM_USE_V2_MODEL_RUNNER')}

TAU_BY_K = ROOT / 'nbs' / 'results' / 'tau_by_k.json'   # τ of the trained tiny checkpoint for each k, full head and V/8 rows (vLLM CPU)

def tau_by_k(path=TAU_BY_K) -> dict:
    "{(K, k): τ} of the trained tiny checkpoint served in vLLM with a K-row draft head at k speculative tokens (the largest K: the full head)."
    return {(r['K'], r['k']): r['mean_acceptance_length'] for r in json.loads(Path(path).read_text()) if r.get('K')}

def tau_ratio_k(K_frac=8, path=TAU_BY_K) -> dict:
    "{k: τ with a draft head of V/`K_frac` rows over τ with the full head} for every k the trained tiny checkpoint was served with in vLLM."
    t = tau_by_k(path)
    V = max(K for K, _ in t)
    return {k: t[V // K_frac, k] / t[V, k] for K, k in t if K == V and (V // K_frac, k) in t}

def targets(rec: dict, tau_head: float = None) -> list:
    """The benchmark's three targets, from a record: [{'target', 'goal', 'value', 'met', 'detail'}], `value` None where the
    record lacks a run. `tau_head` (default `tau_ratio_k()[3]`) scales decode speed for the truncated head's lower acceptance."""
    R, D = rec['runs'], lambda n, b: R[n]['batches'][str(b)]['draft_ms']
    ok = lambda *ns: all(n in R and 'batches' in R[n] for n in ns)
    out = []
    base, heads = 'Qwen3.5-27B/bf16-target/bf16/k3', [f'Qwen3.5-27B/{t}-target/fp8-head/k3' for t in ('bf16', 'fp8')]
    head = next((n for n in heads if ok(n)), None)
    r = {b: D(head, b) / D(base, b) for b in (1, 4, 16)} if head and ok(base) else None
    out.append(dict(target="27B draft: mtp_lit FP8 + 40 960-row head vs vLLM's BF16 full-head draft (BF16 target), B <= 16", goal='<= 0.30x',
                    value=max(r.values()) if r else None, met=bool(r) and max(r.values()) <= 0.30,
                    detail=r and f"{', '.join(f'B={b}: {x:.3f}' for b, x in r.items())} (the FP8 draft under the {head.split('/')[1]})"))
    bf, f8 = 'Qwen3.5-35B-A3B/bf16-target/bf16/k3', 'Qwen3.5-35B-A3B/bf16-target/fp8/k3'
    r = {b: D(f8, b) / D(bf, b) for b in R[f8]['batches']} if ok(bf, f8) else None
    old = set(R[f8].get('superseded', {}).get('batches', ())) if r else set()   # batches timed before a change to the served path
    out.append(dict(target='35B-A3B draft: FP8 vs BF16 at every batch', goal='< 1x', value=max(r.values()) if r else None,
                    met=bool(r) and max(r.values()) < 1, detail=r and ', '.join(f"B={b}: {x:.3f}{'*' * (b in old)}" for b, x in r.items())
                    + (' (* timed before the path served now: superseded)' if old else '')))
    vl, hd = 'Qwen3.5-27B/fp8-target/bf16/k3', 'Qwen3.5-27B/fp8-target/fp8-head/k3'
    if ok(vl, hd, base):
        tk = tau_ratio_k() if tau_head is None else None   # an explicit tau_head has no k: then k = 3 alone
        th = tk[3] if tk else tau_head
        st = lambda n: step_ms(R[n]['batches']['1'])
        bf_step = bf16_draft_step(rec, '1')
        v = th * bf_step / st(hd)
        rows = R[hd]['settings']['head_rows']
        by_k = head_gain_k(rec, tk) if tk else {}
        wall = lambda k: not all(R[f'Qwen3.5-27B/{n}/k{k}']['batches']['1'].get('worker_step_ms') for n in ('fp8-target/bf16', 'fp8-target/fp8-head'))
        out.append(dict(target='27B decode, FP8 target, B = 1: FP8 + truncated draft vs BF16-draft MTP (modelled step)', goal='>= 1.25x', value=v,
                        met=v >= 1.25, detail=f'step {st(hd):.2f} ms vs {bf_step:.2f} ms (modelled: vLLM FP8-draft step {st(vl):.2f} ms with the BF16 '
                        f'draft time put back), x tau ratio {th:.3f} (the trained tiny checkpoint at K = V/8; the served head is V/'
                        f"{rec_vocab(hd) / rows:.1f}); vs vLLM's own FP8 draft (both steps measured, in two engines): {th * st(vl) / st(hd):.3f}x; "
                        f"both steps modelled on vLLM's FP8-draft engine (each draft's own time): {th * bf_step / swapped_step(rec, vl, hd, '1'):.3f}x; "
                        f'a draft of no cost would give {bf_step / (bf_step - D(base, 1)):.3f}x'
                        + (f"; at each served k (its own tau ratio; w: a wall-clock step): {', '.join(f'k = {k}: {x:.3f}x' + 'w' * wall(k) for k, x in by_k.items())}"
                           if len(by_k) > 1 else '')))
    else: out.append(dict(target='27B decode, FP8 target, B = 1: FP8 + truncated draft vs BF16-draft MTP', goal='>= 1.25x',
                          value=None, met=False, detail=None))
    return out

def step_ms(row: dict) -> float:
    """A batch's decode step, ms: timed one at a time in the worker where the run has it (`worker_step_ms`), else the
    wall-clock difference of two decodes over their steps (`step_ms`; runs before b571924)."""
    return row.get('worker_step_ms') or row['step_ms']

def swapped_step(rec: dict, base: str, draft: str, b: str) -> float:
    """Modelled ms of a decode step at batch `b`: run `base`'s step with its draft time replaced by run `draft`'s (both of
    one k: the verify and vLLM's scheduling between them are the same code)."""
    s, d = (rec['runs'][n]['batches'][b] for n in (base, draft))
    return step_ms(s) - s['draft_ms'] + d['draft_ms']

def bf16_draft_step(rec: dict, b: str, model: str = 'Qwen3.5-27B', k: int = 3) -> float:
    """Modelled ms of a decode step at batch `b` under the FP8 target with vLLM's BF16 draft: vLLM's online FP8 quantizes its
    own draft too, so this is the FP8 target's step with vLLM's FP8 draft time replaced by its BF16 draft time (BF16 target)."""
    return swapped_step(rec, f'{model}/fp8-target/bf16/k{k}', f'{model}/bf16-target/bf16/k{k}', b)

def head_gain_k(rec: dict, tk: dict = None, b: str = '1') -> dict:
    """{k: decode speed of mtp_lit's FP8 + truncated draft over BF16-draft MTP} for the 27B FP8 target at batch `b`, each k
    served with all three engines: the head engine's step as measured over `bf16_draft_step`, times the τ ratio (`tk`, default `tau_ratio_k()`)."""
    R, tk = rec['runs'], tau_ratio_k() if tk is None else tk
    n = lambda d, k: f'Qwen3.5-27B/{d}/k{k}'
    ks = sorted(k for k in tk if all(n(d, k) in R and 'batches' in R[n(d, k)] for d in ('fp8-target/bf16', 'bf16-target/bf16', 'fp8-target/fp8-head')))
    return {k: tk[k] * bf16_draft_step(rec, b, k=k) / step_ms(R[n('fp8-target/fp8-head', k)]['batches'][b]) for k in ks}

def rec_vocab(name: str) -> int:
    "The vocabulary of a run's model, from its real config.json."
    c = json.loads((CONFIGS / name.split('/')[0] / 'config.json').read_text())
    return c.get('text_config', c)['vocab_size']

def print_targets(rec: dict):
    for t in targets(rec):
        v = 'not measured' if t['value'] is None else f"{t['value']:.3f}x: {'met' if t['met'] else 'MISSED'}"
        print(f"{t['target']} (goal {t['goal']}): {v}" + (f"  [{t['detail']}]" if t['detail'] else ''))

def _one(argv):
    "Subprocess entry: `bench_served.py --one SPEC.json OUT.json`."
    spec = json.loads(Path(argv[0]).read_text())
    import torch
    env = spec.pop('env')
    if not torch.cuda.is_available():
        from mtp_lit.demo import CPU_ENV
        env = CPU_ENV | env
    os.environ.update(env)
    Path(argv[1]).write_text(json.dumps(engine_bench(**spec)))

def run_list(a) -> list:
    """The engines to start, as (model, target, draft, k): `--runs` names them as the record does (`MODEL/TARGET-target/DRAFT/kK`,
    `plain` with k0 for the target alone), else every `--models` x `--targets` x `--drafts` x `--ks`, the targets alone after
    them with `--plain`."""
    if a.runs:
        out = []
        for n in a.runs:
            m, t, d, k = (n.split('/') + [''] * 4)[:4]
            if not (n.count('/') == 3 and t.endswith('-target') and t[:-7] in ('bf16', 'fp8') and (d in DRAFTS or d == 'plain') and re.fullmatch(r'k\d+', k)):
                sys.exit(f"--runs {n}: expected MODEL/(bf16|fp8)-target/({'|'.join(DRAFTS)}|plain)/kK, as the record names runs")
            out.append((m, t[:-7], d, int(k[1:])))
        return out
    runs = [(m, t, 'plain', 0) for m in a.models for t in a.targets] if a.plain else []
    return [(m, t, d, k) for m in a.models for t in a.targets for d in a.drafts for k in a.ks] + runs

def record_run(rec: dict, name: str, run: dict) -> dict:
    """Put `run` into the record `rec` as `name`. A timed run it replaces moves to `rec['earlier']` (the page puts the two
    engines' steps side by side; a `superseded` note goes with it). A failed run does not replace a timed one: the record
    keeps the timing, and the error stays in the engine's log."""
    old = rec['runs'].get(name)
    if old and 'batches' in old:
        if 'batches' not in run: return rec
        rec.setdefault('earlier', {})[name] = old
    rec['runs'][name] = run
    return rec

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--out', required=True)
    ap.add_argument('--work', default=None)
    ap.add_argument('--models', nargs='*', default=['Qwen3.5-27B', 'Qwen3.5-35B-A3B'])
    ap.add_argument('--targets', nargs='*', default=['bf16'])
    ap.add_argument('--drafts', nargs='*', default=[d for d in DRAFTS if d not in OUTSIDE_SWEEP], choices=list(DRAFTS))
    ap.add_argument('--ks', nargs='*', type=int, default=[3])
    ap.add_argument('--plain', action='store_true', help='also the target alone (k = 0)')
    ap.add_argument('--runs', nargs='*', default=[], help='engines by their record names (MODEL/TARGET-target/DRAFT/kK), instead of the product above')
    ap.add_argument('--batches', nargs='*', type=int, default=[1, 4, 16, 64])
    ap.add_argument('--prompt', type=int, default=512, help='prompt tokens per sequence (the committed record: 512)')
    ap.add_argument('--tokens', type=int, default=64, help='decoded tokens per sequence in the timed difference')
    ap.add_argument('--head-rows', type=int, default=40960)
    ap.add_argument('--profile', nargs='*', type=int, default=[], help='batch sizes to profile after timing (torch.profiler in the worker)')
    ap.add_argument('--budget', type=float, default=None, help='seconds: start no engine that would end past this')
    ap.add_argument('--estimate', type=float, default=None, help="seconds one engine takes, for --budget (default: the longest so far)")
    ap.add_argument('--cold-estimate', type=float, default=COLD_S, help="seconds for --budget of a model's first engine under this --work "
                    "(no Triton kernel of its shapes compiled yet)")
    ap.add_argument('--config-dir', default=None, help='read NAME/config.json from here instead of tests/fixtures/checkpoints')
    a = ap.parse_args(argv)
    global CONFIGS
    if a.config_dir: CONFIGS = Path(a.config_dir)
    work = Path(a.work or tempfile.mkdtemp(prefix='mtp_lit_bench_'))
    out = Path(a.out)
    rec = json.loads(out.read_text()) if out.exists() else {'runs': {}}
    other = sorted({r['settings']['prompt'] for r in rec['runs'].values() if r.get('settings', {}).get('prompt', a.prompt) != a.prompt})
    if other:   # a run's name does not say its prompt: another prompt's runs would replace runs they are not comparable with
        sys.exit(f"{out} holds runs at --prompt {', '.join(map(str, other))}; write the --prompt {a.prompt} runs to another --out")
    env, was = environment(), rec.get('environment')
    if was and any(was.get(k) != env[k] for k in ('device', 'vllm', 'torch')):   # one record, one machine: its runs compare
        sys.exit(f"{out} holds runs on {was.get('device')} (vLLM {was.get('vllm')}, torch {was.get('torch')}); this machine is "
                 f"{env['device']} (vLLM {env['vllm']}, torch {env['torch']}): write its runs to another --out")
    rec['environment'] = env
    runs = run_list(a)
    for d in {d for _, _, d, _ in runs}:   # a draft window shortens the draft's attention only where the context is longer than it
        w = int(DRAFTS.get(d, {}).get('MTP_DRAFT_WINDOW', 0))
        if w and a.prompt + a.tokens <= w:
            print(f"{d}: the context ({a.prompt} + {a.tokens} tokens) fits in the {w}-token window, so it times the draft without one; "
                  f"use --prompt {4 * w} or more", flush=True)
    t_start, longest = time.time(), 0.0
    for m, t, d, k in runs:
        name = f'{m}/{t}-target/{d}/k{k}'
        est = a.estimate or longest
        if not (work / 'warm' / m).exists(): est = max(est, a.cold_estimate)   # its Triton kernels compile and autotune afresh
        if a.budget and time.time() - t_start + est > a.budget:
            print(f'{name}: not started ({a.budget:.0f} s budget)', flush=True); continue
        mdir = served_dir(m, work / f'{m}-head' if 'head' in d else work / m, a.head_rows if 'head' in d else 0)
        cache_root = work / 'vllm-cache' / name.replace('/', '--')   # each engine compiles afresh: no artifact of another run
        (work / 'vllm-cache' / 'modelinfos').mkdir(parents=True, exist_ok=True); cache_root.mkdir(parents=True, exist_ok=True)
        if not (cache_root / 'modelinfos').exists():   # the registry's inspection of model classes is shared (one subprocess per class, once)
            (cache_root / 'modelinfos').symlink_to(work / 'vllm-cache' / 'modelinfos')
        # Triton's compiled kernels and autotuning results, shared by the run's engines: vLLM otherwise puts them under each
        # engine's cache root (InductorAdaptor.initialize_cache), so every engine compiles and autotunes every Triton kernel
        # afresh (the start-up's profiling run, where most first run, took 90 s of a 260 s start on the H200). Keyed by
        # source, signature and shapes: a kernel runs as it would have, compiled once
        cache = {'VLLM_CACHE_ROOT': str(cache_root), 'TRITON_CACHE_AUTOTUNING': '1', 'TRITON_CACHE_DIR': str(work / 'triton-cache')}
        spec = dict(model=str(mdir), k=k, target=t, batches=a.batches, prompt=a.prompt, tokens=a.tokens, profile=a.profile,
                    spec_opts=SPEC_OPTS.get(d, {}) if k else {}, env=DRAFTS.get(d, {}) | cache)
        sp, op = work / f'{name.replace("/", "--")}.spec.json', work / f'{name.replace("/", "--")}.out.json'
        sp.write_text(json.dumps(spec))
        print(name, flush=True)
        t0 = time.time()
        p = subprocess.run([sys.executable, __file__, '--one', str(sp), str(op)], capture_output=True, text=True)
        log = work / 'logs' / f'{name.replace("/", "--")}.log'
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(p.stdout + p.stderr)
        jit = sorted(set(re.findall(r'JIT compilation during inference: (\w+)', p.stdout + p.stderr)))   # vLLM's JIT monitor
        if p.returncode or not op.exists():
            from mtp_lit.demo import root_cause
            run = {'error': root_cause(p.stdout + p.stderr), 'log': str(log)}
            print('  ERROR', run['error'][:1500], flush=True)
        else:
            run = json.loads(op.read_text()) | {'total_s': round(time.time() - t0, 1)}
            print(f"  start {run['start_s']} s, total {time.time() - t0:.0f} s", flush=True)
            (work / 'warm').mkdir(exist_ok=True); (work / 'warm' / m).touch()
        longest = max(longest, time.time() - t0)
        run['jit_during_inference'] = jit   # Triton kernels first compiled after start-up (a latency spike each)
        run['start_breakdown'] = start_breakdown(p.stdout + p.stderr)
        run['settings'] = {'prompt': a.prompt, 'tokens': a.tokens, 'head_rows': a.head_rows if 'head' in d else None,
                           'speculative_config': spec['spec_opts'], 'env': DRAFTS.get(d, {}), 'plugin': plugin_commit(),
                           'kernel_table': kernel_table_hash(), 'triton_cache': 'shared by the run\'s engines'}
        run['date'] = time.strftime('%Y-%m-%d')
        record_run(rec, name, run)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(rec, indent=1))
    print_targets(rec)

if __name__ == '__main__':
    if sys.argv[1:2] == ['--one']: _one(sys.argv[2:])
    else: main()
