"""Miniature *real* checkpoints for `tests/test_real_layouts.py`: each folder of `fixtures/checkpoints` (metadata of a
public checkpoint, never weights) turned into a checkpoint of a few MB that vLLM's loader can build the MTP draft of.

Kept from the real checkpoint: config.json and the quant config (dimensions shrunk, every other key kept; layer-indexed
exclusion lists remapped to the fewer layers, the DeepSeek-style MTP layer index N moved along), the tensor names of the
target and of the draft, the expert layout (fused / split, target and draft separately), the dtypes (BF16, F32 where the
weight table says so, FP8 e4m3 128x128 blocks + `weight_scale_inv`, ModelOpt NVFP4 packed uint8 + FP8 group scales +
`weight_scale_2` (+ `input_scale` for W4A4), ModelOpt FP8 per-tensor), and whether the draft shares a shard with the
target (placement compressed to 2 shards: the real last shard's tensors in the second). Shrunk: hidden 128 (MiMo 256),
2-4 target layers (keeping the layer pattern), 8 experts, vocabulary 512, a byte-level tokenizer of 257 tokens.

Sources, in order: `mtp_weights.json` (the draft's real names and dtypes: the builder checks its own draft against it),
`*_raw_table.md` (the verbatim weight-table rows: target naming, fused/split experts, `A_log` dtype, shard files), the
quant config (which target module is FP8 / NVFP4). Assumptions where the metadata says nothing:
- target naming without a weight table (MiMo, the NVIDIA exports): vLLM 0.32's / Transformers' naming for the family;
- ModelOpt NVFP4 exports store routed experts split per expert, and the MTP layer's split too (as the BF16 release);
- linear attention's `A_log` / `norm` dtype, where the weight table has no row of it: BF16 for Qwen3.6 (its SOURCE.txt),
  F32 otherwise (the Qwen3.5 tables);
- the draft is BF16 wherever no weight list says otherwise (the NVIDIA exports exclude it from quantisation);
- config-less folders borrow a sibling's config, its quantization_config dropped (as `mtp_lit.inspect_ckpt.make_skeleton`);
- MiMo's config.json lost the repository's `auto_map` (remote code): a 6-line `MiMoConfig` restores it, so load these
  with `trust_remote_code` (`ENGINE_ARGS`); no vision tower weights (the draft never builds one).

Deterministic: the same inputs give the same bytes (seeded generator, sorted names).

    python tests/real_miniatures.py OUT_DIR [NAME ...]
"""
import copy, fnmatch, json, re, sys
from pathlib import Path

import torch
from safetensors.torch import save_file

from mtp_lit.fp8 import quantize_fp8
from mtp_lit.layouts import detect_family, text_config

FIXTURES = Path(__file__).parent / 'fixtures' / 'checkpoints'
NAMES = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())
BORROW = {'Qwen3.6-35B-A3B': 'Qwen3.5-35B-A3B', 'nvidia-DeepSeek-V3-0324-NVFP4': 'DeepSeek-V3'}   # config-less folders
ELIDED = {'DeepSeek-V3'}            # its weight list is a README excerpt (8 of layer 61's tensors)
V = 512                             # vocabulary
E4M3_MAX = 448.0
ENGINE_ARGS = {'MiMo-7B-Base': {'trust_remote_code': True}}
QWEN, MLA = ('qwen3_5', 'qwen3_5_moe', 'qwen3_next'), ('deepseek_v3', 'glm4_moe_lite')
MIMO_CONFIG = '''from transformers.models.qwen2.configuration_qwen2 import Qwen2Config


class MiMoConfig(Qwen2Config):
    model_type = "mimo"

    def __init__(self, *a, num_nextn_predict_layers=0, **kw):
        self.num_nextn_predict_layers = num_nextn_predict_layers
        super().__init__(*a, **kw)
'''


# ----------------------------------------------------------------------------------------------------- metadata
def _json(p): return json.loads(p.read_text()) if p.exists() else None


def read_config(name) -> dict:
    "The folder's config.json (else the Transformers dump), else its sibling's without `quantization_config`."
    d = FIXTURES / name
    for f in ('config.json', 'config.transformers_dump_from_report.json'):
        if (d / f).exists(): return _json(d / f)
    return {k: v for k, v in read_config(BORROW[name]).items() if k != 'quantization_config'}


ROW = re.compile(r"\|\s*`([^`]+)`[^|]*\|\s*`\[[^\]]*\]`\s*\|\s*`([^`]+)`\s*\|[^|]*\|\s*([^|]+?)\s*\|")


def raw_rows(name) -> list:
    """`[(regex, dtype, file)]` of the folder's `*_raw_table.md` rows; a row name's ranges ('layers.0-38.',
    'experts.0-255.') become a regex matching exactly those indices."""
    out = []
    for f in sorted((FIXTURES / name).glob('*raw_table.md')):
        for m in map(ROW.match, f.read_text().splitlines()):
            if m: out.append((_row_regex(m.group(1)), m.group(2), m.group(3)))
    return out


def _row_regex(row):
    parts = re.split(r'(?:(?<=layers\.)|(?<=experts\.))(\d+-\d+)', row)   # ranges at the odd places
    def rng(r): a, b = map(int, r.split('-')); return '(?:' + '|'.join(map(str, range(a, b + 1))) + ')'
    return re.compile(''.join(rng(p) if i % 2 else re.escape(p) for i, p in enumerate(parts)) + '$')


def _row(rows, name):
    return next(((dt, f) for rx, dt, f in rows if rx.match(name)), (None, None))


# ----------------------------------------------------------------------------------------------------- configs
def _clip_token_ids(t):
    for k in ('bos_token_id', 'pad_token_id', 'eos_token_id'):
        v = t.get(k)
        if isinstance(v, int): t[k] = min(v, V - 1)
        elif isinstance(v, list): t[k] = [min(x, V - 1) for x in v]


def shrink_text(t: dict, fam: str) -> tuple[int, int]:
    "Shrink the (text) config `t` in place, keeping its keys and layer pattern; returns (old, new) num_hidden_layers."
    old = t['num_hidden_layers']
    if fam in QWEN:
        n, ratio = 4, t.get('linear_num_value_heads', 32) // t.get('linear_num_key_heads', 16)
        t.update(hidden_size=128, num_attention_heads=2, num_key_value_heads=1, head_dim=128,   # k/v rows 128: whole FP8 blocks
                 linear_num_key_heads=1, linear_num_value_heads=ratio, linear_key_head_dim=64, linear_value_head_dim=64)
        if 'intermediate_size' in t: t['intermediate_size'] = 256
        if 'num_experts' in t: t.update(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=128, shared_expert_intermediate_size=128)
        if 'layer_types' in t: t['layer_types'] = t['layer_types'][:n]
        elif fam != 'qwen3_next': t['layer_types'] = _layer_types(t, n)
        if 'mrope_section' in t.get('rope_parameters', {}): t['rope_parameters']['mrope_section'] = [6, 5, 5]   # rotary_dim / 2
    elif fam in MLA:
        n = 4 if fam == 'deepseek_v3' else 3
        t.update(hidden_size=128, num_attention_heads=2, num_key_value_heads=2, q_lora_rank=128, kv_lora_rank=512,
                 qk_rope_head_dim=64, qk_nope_head_dim=64, v_head_dim=64, intermediate_size=256, moe_intermediate_size=128,
                 n_routed_experts=8, num_experts_per_tok=2)
        if t.get('n_group', 1) > 1: t.update(n_group=4, topk_group=2)
        if 'original_max_position_embeddings' in (t.get('rope_scaling') or {}):
            t['rope_scaling']['original_max_position_embeddings'] = 256; t['max_position_embeddings'] = 256 * t['rope_scaling']['factor']
    else:   # mimo: vLLM takes head_dim = hidden / heads; k/v rows 128 (whole FP8 blocks, as the real 1024)
        n = 2
        t.update(hidden_size=256, num_attention_heads=2, num_key_value_heads=1, head_dim=128, intermediate_size=256, max_window_layers=n)
    t.update(vocab_size=V, num_hidden_layers=n)
    _clip_token_ids(t)
    return old, n


def _layer_types(t, n):
    return t.get('layer_types') or ['full_attention' if (i + 1) % t.get('full_attention_interval', 4) == 0 else 'linear_attention'
                                    for i in range(n)]


def shrink_vision(cfg, hidden):
    "The vision config of a multimodal checkpoint shrunk (no weights are written: the draft never builds the tower)."
    cfg['vision_config'].update(depth=1, hidden_size=64, intermediate_size=128, num_heads=1, num_position_embeddings=64,
                                out_hidden_size=hidden)
    if 'deepstack_visual_indexes' in cfg['vision_config']: cfg['vision_config']['deepstack_visual_indexes'] = []
    for i, k in enumerate(('vision_end_token_id', 'vision_start_token_id', 'video_token_id', 'image_token_id')):
        if k in cfg: cfg[k] = V - 1 - i


def remap_layer(s, old, n):
    "Layer-indexed module name `s` for n layers: kept below n, a DeepSeek MTP layer (>= old) moved to n + i - old; else None."
    m = re.search(r'(?<![\w.])((?:model\.)?(?:language_model\.)?layers\.)(\d+)', s)
    if not m or s.startswith('mtp'): return s
    i = int(m.group(2))
    if i < n: return s
    return s[:m.start(2)] + str(n + i - old) + s[m.end(2):] if i >= old else None


def remap_quant(q, old, n):
    "A copy of quant config `q` with every exclusion / targets list and `quantized_layers` map remapped by `remap_layer`."
    if isinstance(q, list): return [remap_quant(x, old, n) for x in q]
    if not isinstance(q, dict): return q
    out = {}
    for k, v in q.items():
        if k in ('ignore', 'exclude_modules', 'ignored_layers', 'modules_to_not_convert', 'targets') and isinstance(v, list):
            out[k] = list(dict.fromkeys(y for y in (remap_layer(x, old, n) for x in v) if y is not None))
        elif k == 'quantized_layers':
            out[k] = {remap_layer(a, old, n): b for a, b in v.items() if remap_layer(a, old, n) is not None}
        else: out[k] = remap_quant(v, old, n)
    return out


# ----------------------------------------------------------------------------------------------------- quant kinds
def quant_of(cfg, hq):
    """`q(module) -> kind` of a target linear: 'fp8block' (config.json fp8), 'nvfp4' (W4A4) / 'nvfp4w' (W4A16) / 'fp8pt'
    (ModelOpt per-tensor FP8) by the ModelOpt config's exclusions or `quantized_layers`, else None (BF16)."""
    if (cfg.get('quantization_config') or {}).get('quant_method') == 'fp8': return lambda m: 'fp8block'
    if hq is None: return lambda m: None
    qc = hq['quantization']
    if qc.get('quant_algo') == 'MIXED_PRECISION':
        kinds = {'FP8': 'fp8pt', 'W4A16_NVFP4': 'nvfp4w', 'NVFP4': 'nvfp4'}
        return lambda m: kinds.get(qc['quantized_layers'].get(m, {}).get('quant_algo'))
    ex = qc.get('exclude_modules') or []
    return lambda m: None if any(fnmatch.fnmatch(m, x) for x in ex) else 'nvfp4'


# ----------------------------------------------------------------------------------------------------- tensor specs
class Spec(dict):
    "name -> (shape, kind, dtype); kind: 'rand' | 'ones' | 'zeros' | 'scalar' (a kv scale) | a quant kind of `quant_of` (a linear)."
    def add(self, name, shape, kind='rand', dtype=torch.bfloat16): self[name] = (tuple(shape), kind or 'rand', dtype)
    def linear(self, name, out, inn, q=None): self.add(name + '.weight', (out, inn), q)
    def norm(self, name, n, dtype=torch.bfloat16): self.add(name + '.weight', (n,), 'ones', dtype)

    def mlp(self, p, I, H, q=lambda m: None):
        for n, o, i in (('gate_proj', I, H), ('up_proj', I, H), ('down_proj', H, I)): self.linear(p + n, o, i, q(p + n))

    def experts(self, p, E, F, H, layout, q=lambda m: None):
        if layout == 'fused': self.add(p + 'gate_up_proj', (E, 2 * F, H)); self.add(p + 'down_proj', (E, H, F))
        else:
            for e in range(E): self.mlp(f'{p}{e}.', F, H, q)


def qwen_tensors(t, fam, q, a_log_dtype, target_experts, draft_experts, kv_scales):
    """Qwen3.5 / Qwen3.5-MoE (`model.language_model.*`, linear_attn in_proj_qkv/z/b/a) and Qwen3-Next (`model.*`,
    in_proj_qkvz/ba); the draft at `mtp.*`, always BF16."""
    S = Spec()
    H, nh, kv, hd = t['hidden_size'], t['num_attention_heads'], t['num_key_value_heads'], t['head_dim']
    nk, nv, dk, dv, K = (t[k] for k in ('linear_num_key_heads', 'linear_num_value_heads', 'linear_key_head_dim',
                                        'linear_value_head_dim', 'linear_conv_kernel_dim'))
    gate = fam == 'qwen3_next' or t.get('attn_output_gate', True)
    pre = 'model.' if fam == 'qwen3_next' else 'model.language_model.'
    S.add(pre + 'embed_tokens.weight', (V, H)); S.norm(pre + 'norm', H)
    if not t.get('tie_word_embeddings', False): S.linear('lm_head', V, H, q('lm_head'))
    no_q = lambda m: None

    def attn(p, q):
        a = p + 'self_attn.'
        for n, o, i in (('q_proj', nh * hd * (1 + gate), H), ('k_proj', kv * hd, H), ('v_proj', kv * hd, H), ('o_proj', H, nh * hd)):
            S.linear(a + n, o, i, q(a + n))
        S.norm(a + 'q_norm', hd); S.norm(a + 'k_norm', hd)
        if kv_scales and q is not no_q: S.add(a + 'k_proj.k_scale', (), 'scalar', torch.float32); S.add(a + 'v_proj.v_scale', (), 'scalar', torch.float32)

    def linear_attn(p):
        a = p + 'linear_attn.'
        ins = ((('in_proj_qkvz', 2 * nk * dk + 2 * nv * dv), ('in_proj_ba', 2 * nv)) if fam == 'qwen3_next' else
               (('in_proj_qkv', 2 * nk * dk + nv * dv), ('in_proj_z', nv * dv), ('in_proj_b', nv), ('in_proj_a', nv)))
        for n, o in ins: S.linear(a + n, o, H, q(a + n))
        S.add(a + 'conv1d.weight', (2 * nk * dk + nv * dv, 1, K)); S.add(a + 'dt_bias', (nv,), 'ones')
        S.add(a + 'A_log', (nv,), 'rand', a_log_dtype); S.norm(a + 'norm', dv, a_log_dtype)
        S.linear(a + 'out_proj', H, nv * dv, q(a + 'out_proj'))

    def mlp(p, layout, q):
        m = p + 'mlp.'
        if 'num_experts' not in t: return S.mlp(m, t['intermediate_size'], H, q)
        S.add(m + 'gate.weight', (t['num_experts'], H))
        S.experts(m + 'experts.', t['num_experts'], t['moe_intermediate_size'], H, layout, q)
        S.mlp(m + 'shared_expert.', t['shared_expert_intermediate_size'], H, q); S.add(m + 'shared_expert_gate.weight', (1, H))

    for l, kind in enumerate(_layer_types(t, t['num_hidden_layers'])):
        p = f'{pre}layers.{l}.'
        S.norm(p + 'input_layernorm', H); S.norm(p + 'post_attention_layernorm', H)
        attn(p, q) if kind == 'full_attention' else linear_attn(p)
        mlp(p, target_experts, q)
    S.linear('mtp.fc', H, 2 * H)
    for n in ('mtp.norm', 'mtp.pre_fc_norm_embedding', 'mtp.pre_fc_norm_hidden', 'mtp.layers.0.input_layernorm', 'mtp.layers.0.post_attention_layernorm'):
        S.norm(n, H)
    attn('mtp.layers.0.', no_q); mlp('mtp.layers.0.', draft_experts, no_q)
    return S


def mla_tensors(t, q, draft_q):
    "DeepSeek-V3/R1 and GLM-4.7-Flash: MLA layers `model.layers.{i}.*`, the draft at `model.layers.{N}.*` (quant kind `draft_q`)."
    S = Spec()
    H, nh, ql, kvl, rope, nope, vd = (t[k] for k in ('hidden_size', 'num_attention_heads', 'q_lora_rank', 'kv_lora_rank',
                                                     'qk_rope_head_dim', 'qk_nope_head_dim', 'v_head_dim'))
    E, F, N = t['n_routed_experts'], t['moe_intermediate_size'], t['num_hidden_layers']
    S.add('model.embed_tokens.weight', (V, H)); S.norm('model.norm', H); S.linear('lm_head', V, H)
    for l in range(N + 1):
        p, lq = f'model.layers.{l}.', (lambda m: draft_q) if l == N else q
        a = p + 'self_attn.'
        S.norm(p + 'input_layernorm', H); S.norm(p + 'post_attention_layernorm', H)
        for n, o, i in (('q_a_proj', ql, H), ('q_b_proj', nh * (nope + rope), ql), ('kv_a_proj_with_mqa', kvl + rope, H),
                        ('kv_b_proj', nh * (nope + vd), kvl), ('o_proj', H, nh * vd)):
            S.linear(a + n, o, i, lq(a + n))
        S.norm(a + 'q_a_layernorm', ql); S.norm(a + 'kv_a_layernorm', kvl)
        if l < t['first_k_dense_replace']: S.mlp(p + 'mlp.', t['intermediate_size'], H, lq)
        else:
            S.add(p + 'mlp.gate.weight', (E, H)); S.add(p + 'mlp.gate.e_score_correction_bias', (E,), 'zeros', torch.float32)
            S.experts(p + 'mlp.experts.', E, F, H, 'split', lq)
            S.mlp(p + 'mlp.shared_experts.', F * t.get('n_shared_experts', 1), H, lq)
    p = f'model.layers.{N}.'
    S.linear(p + 'eh_proj', H, 2 * H); S.add(p + 'embed_tokens.weight', (V, H)); S.linear(p + 'shared_head.head', V, H)
    for n in ('enorm', 'hnorm', 'shared_head.norm'): S.norm(p + n, H)
    return S


def mimo_tensors(t):
    "MiMo-7B (no weight dump): a Qwen2 target with q/k/v biases, the draft at `model.mtp_layers.0.*` (vLLM mimo_mtp.py)."
    S = Spec()
    H, nh, kv, hd, I = (t[k] for k in ('hidden_size', 'num_attention_heads', 'num_key_value_heads', 'head_dim', 'intermediate_size'))
    S.add('model.embed_tokens.weight', (V, H)); S.norm('model.norm', H); S.linear('lm_head', V, H)

    def block(p):
        S.norm(p + 'input_layernorm', H); S.norm(p + 'post_attention_layernorm', H)
        for n, o in (('q_proj', nh * hd), ('k_proj', kv * hd), ('v_proj', kv * hd)):
            S.linear(f'{p}self_attn.{n}', o, H); S.add(f'{p}self_attn.{n}.bias', (o,), 'zeros')
        S.linear(p + 'self_attn.o_proj', H, nh * hd); S.mlp(p + 'mlp.', I, H)
    for l in range(t['num_hidden_layers']): block(f'model.layers.{l}.')
    p = 'model.mtp_layers.0.'; block(p)
    for n in ('token_layernorm', 'hidden_layernorm', 'final_layernorm'): S.norm(p + n, H)
    S.linear(p + 'input_proj', H, 2 * H)
    return S


# ----------------------------------------------------------------------------------------------------- tensors
def materialise(S: Spec, seed: int = 0) -> dict:
    "The tensors of `S` (quantized linears with their scales), random N(0, 0.02) weights from a seeded generator."
    g, out = torch.Generator().manual_seed(seed), {}
    for name, (shape, kind, dt) in sorted(S.items()):
        if kind in ('ones', 'zeros'): out[name] = getattr(torch, kind)(shape, dtype=dt); continue
        if kind == 'scalar': out[name] = torch.tensor(4 / E4M3_MAX); continue
        w, stem = torch.randn(shape, generator=g) * 0.02, name.removesuffix('.weight')
        if kind == 'rand': out[name] = w.to(dt)
        elif kind == 'fp8block': out[name], out[stem + '.weight_scale_inv'] = quantize_fp8(w, 'block')
        elif kind == 'fp8pt':
            out[name], s = quantize_fp8(w, 'per-tensor')
            out[stem + '.weight_scale'], out[stem + '.input_scale'] = s.reshape(()), torch.tensor(4 / E4M3_MAX)
        else: out.update(_nvfp4(stem, w, g, kind == 'nvfp4'))
    return out


def _nvfp4(stem, w, g, w4a4):
    "ModelOpt NVFP4 tensors of weight `w` [o, i]: random packed e2m1 codes, FP8 scales per 16, the global scale(s)."
    o, i = w.shape
    s2 = w.abs().max() / (6 * E4M3_MAX)
    out = {stem + '.weight': torch.randint(0, 256, (o, i // 2), generator=g, dtype=torch.uint8),
           stem + '.weight_scale': (w.reshape(o, i // 16, 16).abs().amax(-1) / 6 / s2).clamp(max=E4M3_MAX).to(torch.float8_e4m3fn),
           stem + '.weight_scale_2': s2.reshape(())}
    if w4a4: out[stem + '.input_scale'] = torch.tensor(4 / (6 * E4M3_MAX))
    return out


def check_draft(name, sd, draft_prefix, real_prefix=None):
    """Raise AssertionError unless the draft tensors of `sd` (names under `draft_prefix`; the real ones under `real_prefix`,
    default the same) are the real `mtp_weights.json`'s, expert indices aside, with the same dtypes."""
    real = _json(FIXTURES / name / 'mtp_weights.json')
    if real is None or name in ELIDED: return
    def norm(n, prefix): return re.sub(r'experts\.\d+\.', 'experts.E.', 'MTP.' + n.removeprefix(prefix))
    dtype = lambda s: 'F8' if '8' in s else 'F32' if '32' in s else 'BF16'
    want = {norm(w['name'], real_prefix or draft_prefix): dtype(w['dtype'].lower()) for w in real}
    got = {norm(n, draft_prefix): dtype(str(t.dtype)) for n, t in sd.items() if n.startswith(draft_prefix)}
    assert got == want, f"{name}: the miniature's draft differs from mtp_weights.json: {sorted(set(got.items()) ^ set(want.items()))[:8]}"


# ----------------------------------------------------------------------------------------------------- checkpoint
def build_tensors(name, cfg, hq, old_n):
    "The miniature's tensors (and checks its draft against the real weight list)."
    t, fam, rows = text_config(cfg), detect_family(cfg).name, raw_rows(name)
    q = quant_of(cfg, hq)
    if fam in QWEN:
        a_log = next(filter(None, (_row(rows, f'{pre}layers.0.linear_attn.A_log')[0] for pre in ('model.', 'model.language_model.'))),
                     'bfloat16' if 'Qwen3.6' in name else 'float32')
        fused = any(rx.match(f'{pre}layers.0.mlp.experts.gate_up_proj') for rx, _, _ in rows for pre in ('model.', 'model.language_model.'))
        real = _json(FIXTURES / name / 'mtp_weights.json') or []
        draft_fused = any(w['name'].endswith('experts.gate_up_proj') for w in real)
        kv = bool(hq and hq['quantization'].get('kv_cache_quant_algo'))
        S = qwen_tensors(t, fam, q, torch.float32 if a_log and '32' in a_log else torch.bfloat16,
                         'fused' if fused else 'split', 'fused' if draft_fused else 'split', kv)
        sd = materialise(S); check_draft(name, sd, 'mtp.')
    elif fam in MLA:
        sd = materialise(mla_tensors(t, q, q('') if hq is None else None))   # the NVFP4 export excludes layer N
        check_draft(name, sd, f"model.layers.{t['num_hidden_layers']}.", f'model.layers.{old_n}.')
    else: sd = materialise(mimo_tensors(t))
    return sd


def shard_of(name, rows, draft, old_n, n):
    """1 or 2: 2 for a tensor the real checkpoint stores in its last shard (by the weight table, the miniature's layer
    index mapped back to the real one), or, without a table row naming one file, for a draft tensor."""
    real = re.sub(r'^model\.layers\.(\d+)\.', lambda m: f'model.layers.{old_n + int(m.group(1)) - n}.' if int(m.group(1)) >= n else m.group(0), name)
    f = _row(rows, real)[1] or ''
    m = re.search(r'-(\d+)-of-0*(\d+)', f)
    return (2 if int(m.group(1)) == int(m.group(2)) else 1) if m else 2 if draft(name) else 1


def byte_tokenizer() -> str:
    "tokenizer.json of a byte-level BPE with the 256 byte symbols and `<|endoftext|>` (id 256), no merges."
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False); tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(['<|endoftext|>'])
    return tok.to_str()


def build(name, root) -> Path:
    "Write the miniature of fixture folder `name` into `root/name` and return it."
    cfg = copy.deepcopy(read_config(name))
    t = cfg.get('text_config', cfg); fam = detect_family(cfg).name
    old_n, n = shrink_text(t, fam)
    if 'vision_config' in cfg: shrink_vision(cfg, t['hidden_size'])
    if 'quantization_config' in cfg: cfg['quantization_config'] = remap_quant(cfg['quantization_config'], old_n, n)
    hq = _json(FIXTURES / name / 'hf_quant_config.json')
    hq = hq and remap_quant(hq, old_n, n)
    files = {'tokenizer.json': byte_tokenizer(),
             'tokenizer_config.json': json.dumps({'tokenizer_class': 'PreTrainedTokenizerFast', 'eos_token': '<|endoftext|>'})}
    if hq: files['hf_quant_config.json'] = json.dumps(hq, indent=2)
    if fam == 'mimo': cfg['auto_map'] = {'AutoConfig': 'configuration_mimo.MiMoConfig'}; files['configuration_mimo.py'] = MIMO_CONFIG
    sd, rows = build_tensors(name, cfg, hq, old_n), raw_rows(name)
    draft = lambda k: k.startswith(('mtp.', 'model.mtp_layers.', f'model.layers.{n}.'))
    shards = {}
    for k in sd: shards.setdefault(shard_of(k, rows, draft, old_n, n), []).append(k)
    dst = Path(root) / name; dst.mkdir(parents=True)
    weight_map = {}
    for j, s in enumerate(sorted(shards)):
        fn = f'model-{j + 1:05d}-of-{len(shards):05d}.safetensors'
        save_file({k: sd[k] for k in shards[s]}, str(dst / fn), metadata={'format': 'pt'})
        weight_map.update({k: fn for k in shards[s]})
    index = {'metadata': {'total_size': sum(v.numel() * v.element_size() for v in sd.values())}, 'weight_map': dict(sorted(weight_map.items()))}
    files.update({'model.safetensors.index.json': json.dumps(index, indent=2), 'config.json': json.dumps(cfg, indent=2)})
    for f, text in files.items(): (dst / f).write_text(text)
    return dst


if __name__ == '__main__':
    for nm in sys.argv[2:] or NAMES:
        d = build(nm, sys.argv[1])
        print(nm, '->', d, sum(f.stat().st_size for f in d.glob('*.safetensors')) // 1024, 'KiB', flush=True)
