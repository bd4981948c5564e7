"""Builders of bad checkpoints for `tests/test_bad_inputs.py`, and a loader that builds an MTP draft exactly as vLLM's
proposer does (`vllm.model_executor.model_loader.get_model` with the speculative config's draft model config), in one
process and without starting an engine: the plugin's load-time checks run, in ~1 s per checkpoint after the imports.

`python tests/bad_inputs.py CASES.json OUT.json` loads every case `{name: [model_dir, env, k, engine_args, probe]}` in turn and
writes `{name: {'loaded', 'class', 'error', 'nonfinite', 'fp8', 'windows', 'log'}}`; `load_drafts` runs that in a subprocess.
`probe` (optional) is the harness's own: `poison` fills every float parameter with NaN before the checkpoint's tensors are
loaded and reports those still NaN after (`unwritten`: no tensor wrote them, even with no mtp_lit option), `dump` writes the
draft's parameters to that safetensors path (`_dump`)."""
import json, os, shutil, subprocess, sys, time
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from mtp_lit.ckpt_io import INDEX, write_checkpoint
from mtp_lit.plugin import attention_window

ENV = {'VLLM_CPU_KVCACHE_SPACE': '1', 'HF_HUB_OFFLINE': '1', 'TRANSFORMERS_OFFLINE': '1', 'VLLM_NO_USAGE_STATS': '1',
       'TOKENIZERS_PARALLELISM': 'false', 'OMP_NUM_THREADS': '1'}


# ---------------------------------------------------------------------------------------------- checkpoint surgery
def copy_ckpt(src, dst) -> Path:
    "A private copy of checkpoint directory `src` at `dst` (real copies, never hard links: tests edit them)."
    shutil.copytree(src, dst)
    return Path(dst)


def edit_tensors(ckpt, fn, files=None) -> Path:
    """Apply `fn(state_dict)` (edits in place) to every safetensors file of `ckpt` (or `files`), rewrite them and the
    index's weight_map (tensors may have been added or removed). Returns `ckpt`."""
    ckpt = Path(ckpt)
    for f in (files or sorted(p.name for p in ckpt.glob('*.safetensors'))):
        sd = load_file(str(ckpt / f)); fn(sd)
        save_file(sd, str(ckpt / f), metadata={'format': 'pt'})
    if (ckpt / INDEX).exists():
        idx = json.loads((ckpt / INDEX).read_text()); wm = {}
        for f in sorted(set(idx['weight_map'].values())):
            if (ckpt / f).exists():
                with safe_open(str(ckpt / f), 'pt') as h: wm.update({k: f for k in h.keys()})
        idx['weight_map'] = dict(sorted(wm.items()))
        (ckpt / INDEX).write_text(json.dumps(idx, indent=2))
    return ckpt


def edit_config(ckpt, fn) -> Path:
    "Apply `fn(config)` (edits in place) to `ckpt/config.json`."
    p = Path(ckpt) / 'config.json'
    cfg = json.loads(p.read_text()); fn(cfg); p.write_text(json.dumps(cfg, indent=2))
    return Path(ckpt)


def set_tensor(name, f):
    "An `edit_tensors` function replacing tensor `name` by `f(old)`."
    def fn(sd): sd[name] = f(sd[name]).contiguous()
    return fn


def drop_tensor(*names):
    def fn(sd):
        for n in names: sd.pop(n)
    return fn


def tiny_ernie_checkpoint(dst, tokenizer_from) -> Path:
    """A tiny ERNIE-4.5 checkpoint (`Ernie4_5_MoeForCausalLM` with no MoE layers, 2 target layers + 1 MTP layer,
    vLLM's `ErnieMTP` draft, `model.mtp_*.0.` tensor names of vllm/model_executor/models/ernie_mtp.py): a family vLLM
    drafts with MTP and mtp_lit does not support. Tokenizer files copied from checkpoint `tokenizer_from`."""
    if Path(dst).exists(): raise FileExistsError(f"{dst} exists")
    src = Path(tokenizer_from)
    V, H, I, L, nh, kv, hd = json.loads((src / 'config.json').read_text())['vocab_size'], 64, 128, 2, 2, 1, 32
    g = torch.Generator().manual_seed(0)
    r = lambda *s: (torch.randn(*s, generator=g) * 0.02).to(torch.bfloat16)
    one = lambda n: torch.ones(n, dtype=torch.bfloat16)
    sd = {'model.embed_tokens.weight': r(V, H), 'model.norm.weight': one(H), 'lm_head.weight': r(V, H)}
    def block(p):
        sd.update({p + 'input_layernorm.weight': one(H), p + 'post_attention_layernorm.weight': one(H),
                   p + 'self_attn.q_proj.weight': r(nh * hd, H), p + 'self_attn.k_proj.weight': r(kv * hd, H),
                   p + 'self_attn.v_proj.weight': r(kv * hd, H), p + 'self_attn.o_proj.weight': r(H, nh * hd),
                   p + 'mlp.gate_proj.weight': r(I, H), p + 'mlp.up_proj.weight': r(I, H), p + 'mlp.down_proj.weight': r(H, I)})
    for l in range(L): block(f'model.layers.{l}.')
    block('model.mtp_block.0.')
    sd.update({'model.mtp_emb_norm.0.weight': one(H), 'model.mtp_hidden_norm.0.weight': one(H),
               'model.mtp_linear_proj.0.weight': r(H, 2 * H)})
    cfg = dict(architectures=['Ernie4_5_MoeForCausalLM'], model_type='ernie4_5_moe', hidden_size=H, intermediate_size=I,
               num_hidden_layers=L, num_attention_heads=nh, num_key_value_heads=kv, head_dim=hd, vocab_size=V,
               max_position_embeddings=2048, rms_norm_eps=1e-6, tie_word_embeddings=False, use_bias=False,
               moe_num_experts=0, moe_num_shared_experts=0, moe_intermediate_size=I, moe_k=1, moe_layer_start_index=L,
               num_nextn_predict_layers=1, bos_token_id=0, eos_token_id=0, pad_token_id=0, torch_dtype='bfloat16',
               rope_parameters={'rope_type': 'default', 'rope_theta': 10000.0})
    return write_checkpoint(dst, cfg, sd, files={f: src / f for f in ('tokenizer.json', 'tokenizer_config.json', 'generation_config.json')})


# ---------------------------------------------------------------------------------------------- vLLM's draft loader
def load_draft(model, k: int = 3, env: dict | None = None, engine_args: dict | None = None):
    """Build and load the MTP draft of checkpoint `model` the way vLLM's proposer does (`get_model` with the speculative
    config's draft model config, plugins loaded, `process_weights_after_loading` run), with `env` set meanwhile.
    `engine_args` may hold a `speculative_config` (merged into the MTP one; a `model` './x' is the directory x in `model`, a separate
    draft checkpoint). Returns the draft module; raises what vLLM / mtp_lit raise."""
    from vllm.config import set_current_vllm_config
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.model_loader import get_model
    from vllm.plugins import load_general_plugins
    from mtp_lit.draft_linear import init_single_process_vllm
    old = {v: os.environ.get(v) for v in (env or {})}
    os.environ.update(env or {})
    try:
        load_general_plugins()
        if not torch.cuda.is_available():   # as vLLM's CPU worker does (torch.accelerator has no CPU allocator)
            from vllm.v1.worker.cpu_model_runner import _set_torch_accelerator_to_noop
            _set_torch_accelerator_to_noop()
        engine_args = dict(engine_args or {})
        spec = {'method': 'mtp', 'num_speculative_tokens': k, **engine_args.pop('speculative_config', {})}
        if str(spec.get('model', '')).startswith('./'): spec['model'] = str(Path(model) / spec['model'][2:])   # a draft checkpoint beside the target
        ea = EngineArgs(model=str(model), dtype='bfloat16', max_model_len=256, enforce_eager=True, max_num_seqs=4,
                        max_num_batched_tokens=256, seed=0, enable_prefix_caching=False, speculative_config=spec, **engine_args)
        vc = ea.create_engine_config()
        init_single_process_vllm()
        with set_current_vllm_config(vc):
            return get_model(vllm_config=vc, model_config=vc.speculative_config.draft_model_config)
    finally:
        for v, x in old.items():
            if x is None: os.environ.pop(v, None)
            else: os.environ[v] = x


def _nonfinite(m) -> list:
    """Draft parameters holding NaN/inf (a part never loaded from the checkpoint, left at torch.empty's bytes, or a bad value);
    not the draft's own `lm_head`, which vLLM's proposer replaces by the target's after loading (an FP8 draft of a checkpoint
    whose head is NVFP4 leaves it unloaded)."""
    out = []
    for n, p in m.named_parameters():
        if n.startswith('lm_head.'): continue
        if p.numel() and (p.is_floating_point()) and not torch.isfinite(p.detach().float()).all(): out.append(n)
    return out


_PROBE = {'poison': False, 'keep': False, 'loaded': None}


def _probe_loaders():
    """Wrap vLLM's checkpoint and dummy loaders' `load_weights` (before `process_weights_after_loading`): with `_PROBE['poison']`
    every float parameter is NaN (e4m3: 0x7F) before the checkpoint's tensors are loaded; with `_PROBE['keep']` `_PROBE['loaded']` gets the parameters
    as loaded (copies) and the output sizes of each merged linear."""
    from vllm.model_executor.model_loader.default_loader import DefaultModelLoader
    from vllm.model_executor.model_loader.dummy_loader import DummyModelLoader
    def wrap(cls):
        base = cls.load_weights
        def load_weights(self, model, model_config):
            if _PROBE['poison']:
                for p in model.parameters():
                    if p.dtype == torch.float8_e4m3fn: p.data.view(torch.uint8).fill_(0x7F)
                    elif p.is_floating_point(): p.data.fill_(float('nan'))
            out = base(self, model, model_config)
            if _PROBE['keep']: _PROBE['loaded'] = ({n: p.detach().cpu().clone() for n, p in model.named_parameters()},
                                {n: list(m.output_sizes) for n, m in model.named_modules() if len(getattr(m, 'output_sizes', ()) or ()) > 1})
            return out
        cls.load_weights = load_weights
    wrap(DefaultModelLoader); wrap(DummyModelLoader)


def _dump(m, path) -> None:
    """Write draft `m`'s parameters to safetensors file `path` (FP8 ones as e4m3 with their float32 scales), the parameters as
    loaded (before `process_weights_after_loading`) to `path`.loaded.safetensors, and their shapes, dtypes and the output sizes
    of each merged linear to `path`.json."""
    save_file({n: p.detach().cpu().contiguous() for n, p in m.named_parameters()}, str(path))
    params, shards = _PROBE['loaded']
    save_file({n: t.contiguous() for n, t in params.items()}, str(path) + '.loaded.safetensors')
    Path(str(path) + '.json').write_text(json.dumps({'params': {n: [list(t.shape), str(t.dtype).removeprefix('torch.')] for n, t in params.items()},
                                                     'shards': shards}, indent=1))


def _unwritten() -> list:
    "The parameters (as loaded, before `process_weights_after_loading`) with a NaN or inf element: with the poison on, those no checkpoint tensor wrote."
    params, _ = _PROBE['loaded']
    return sorted(n for n, t in params.items() if t.numel() and t.is_floating_point() and
                  not (torch.isfinite(t.float()).all() if t.dtype != torch.float8_e4m3fn else ((t.view(torch.uint8) & 0x7F) != 0x7F).all()))


def _main(cases_json, out_json):
    torch.set_num_threads(1)
    from vllm.model_executor.models import registry   # inspect each architecture in this process, which imports its module anyway,
    registry._run_in_subprocess = lambda fn: fn()      # not in a fresh Python per architecture (~10 s each on a 2-core machine)
    _probe_loaders()
    cases = json.loads(Path(cases_json).read_text())
    res = {}
    for name, (model, env, k, *ea) in cases.items():
        print(f'{_MARK}{name}', flush=True); t0 = time.time()
        probe = ea[1] if len(ea) > 1 else {}   # {'poison': bool, 'dump': path}: the harness's own options, not vLLM's
        ea = ea[:1]
        _PROBE.update(poison=bool(probe.get('poison')), keep=bool(probe), loaded=None)   # a copy of the loaded parameters only for a probe
        try:
            m = load_draft(model, k, env, *ea)
            if probe.get('dump'): _dump(m, probe['dump'])
            if probe.get('poison'): unwritten = _unwritten()
            r = {'loaded': True, 'class': f'{type(m).__module__}.{type(m).__qualname__}', 'error': None,
                 'bases': [f'{c.__module__}.{c.__qualname__}' for c in type(m).__mro__[1:]], 'nonfinite': _nonfinite(m),
                 'fp8': sorted(n for n, p in m.named_parameters() if p.dtype == torch.float8_e4m3fn),
                 'windows': sorted({attention_window(a) for a in m.modules() if type(a).__name__ == 'Attention'}, key=str),
                 'head': list(m.draft_lm_head.weight.shape) if hasattr(m, 'draft_lm_head') else None,
                 'tied': getattr(m.config, 'tie_word_embeddings', None),   # vLLM unties a config whose checkpoint holds a *lm_head.weight
                 'unwritten': unwritten if probe.get('poison') else None,
                 'logits': sorted({type(x).__name__ for x in m.modules() if type(x).__name__.endswith('Logits') or 'LogitsProcessor' in type(x).__name__})}
            if ea and ea[0].get('load_format') == 'dummy':   # weights known from vLLM's seeded dummy loader: the FP8 experts against BF16
                from generic_moe import probe_experts
                r['experts'] = probe_experts(m)
        except Exception as e:
            r = {'loaded': False, 'class': None, 'error': _error(e), 'nonfinite': None}
        sys.stdout.flush(); sys.stderr.flush()
        r['seconds'] = round(time.time() - t0, 2)
        res[name] = r
        Path(out_json).write_text(json.dumps(res, indent=1))


_MARK = '@@mtp_lit-load-case '


def _error(e: Exception) -> str:
    "`Type: message` of a load's exception; a bare one (an `assert` in vLLM) names the file and function that raised it."
    if str(e): return f'{type(e).__name__}: {e}'
    import traceback
    f = traceback.extract_tb(e.__traceback__)[-1]
    return f"{type(e).__name__} in {'/'.join(Path(f.filename).parts[-3:])}:{f.lineno} ({f.name})"


def load_drafts(cases: dict, workdir, timeout: int = 600) -> dict:
    """Load every case `{name: (model_dir, env, k[, engine_args[, probe]])}` with `load_draft` in one fresh Python process (vLLM state and plugin
    registration stay out of pytest's). Returns `{name: {'loaded', 'class', 'error', 'nonfinite', 'log', 'seconds'}}`."""
    workdir = Path(workdir); workdir.mkdir(parents=True, exist_ok=True)
    cj, oj, log = workdir / 'cases.json', workdir / 'results.json', workdir / 'load_drafts.log'
    cj.write_text(json.dumps({n: [str(c[0]), *c[1:]] for n, c in cases.items()}))
    env = {**os.environ, **ENV}
    if not torch.cuda.is_available(): env.setdefault('VLLM_CPU_OMP_THREADS_BIND', 'auto')
    with open(log, 'w') as lf:
        rc = subprocess.run([sys.executable, __file__, str(cj), str(oj)], stdout=lf, stderr=subprocess.STDOUT, env=env,
                            timeout=timeout).returncode
    if not oj.exists(): raise RuntimeError(f"load_drafts: the loader process failed (exit {rc}); log {log}:\n{log.read_text()[-3000:]}")
    res = json.loads(oj.read_text())
    case = None
    for line in log.read_text().splitlines():          # vLLM's log lines (stdout) of each case: those naming mtp_lit
        if line.startswith(_MARK): case = line[len(_MARK):]; continue
        if case in res and 'mtp_lit' in line: res[case].setdefault('log', []).append(line)
    for r in res.values(): r.setdefault('log', [])
    missing = set(cases) - set(res)
    if missing: raise RuntimeError(f"load_drafts: the loader process stopped (exit {rc}) before {sorted(missing)}; log {log}")
    return res


if __name__ == '__main__':
    _main(*sys.argv[1:3])
