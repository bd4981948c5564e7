"""Real-weight tiny checkpoints of `generic_drafts`' MTP draft classes: the same config, plus safetensors whose tensor NAMES are
what a real checkpoint of that architecture stores for its MTP layer and the target tensors the draft loads (embedding, head),
so that vLLM's weight stream goes through each class's own `load_weights` and mtp_lit's wrapper around it (`--load-format
dummy` never calls it).

The names are derived from vLLM's classes, not guessed: `LAYOUT` (tests/fixtures/generic_layouts.json) holds, per class, the
draft's parameters as vLLM's loader builds them (name, shape, dtype; from a dummy build with no mtp_lit option, `derive`) and the
output sizes of each merged linear; `checkpoint_tensors` inverts each class's own mappings: merged linears split into their
shards (`FUSED`: the names of the classes' `stacked_params_mapping`), routed experts split per expert
(`FusedMoE.make_expert_params_mapping`'s `experts.{e}.gate_proj/up_proj/down_proj`, or a class's own `EXPERTS`), the
spec-layer renaming and the class's own names (`RENAME`: the inverse of its `load_weights`' rewriting), parameters computed
after loading dropped (`DERIVED`). Values: seeded random BF16 (norm weights near 1), float32 where vLLM's parameter is.

A class whose names are right loads with no mtp_lit option and every parameter written (`bad_inputs.load_drafts` with
`probe={'poison': True}`): that is the check on this module. `python tests/generic_weights.py --derive` rewrites `LAYOUT`.
"""
import json, re, sys
from pathlib import Path

import torch

import generic_drafts as gd

LAYOUT = Path(__file__).parent / 'fixtures' / 'generic_layouts.json'
FUSED = {'qkv_proj': ('q_proj', 'k_proj', 'v_proj'), 'gate_up_proj': ('gate_proj', 'up_proj'),
         'fused_qkv_a_proj': ('q_a_proj', 'kv_a_proj_with_mqa')}
DERIVED = re.compile(r'\.(W_UK_T|W_UV)$')   # MLA's absorbed matrices: computed from kv_b_proj after loading
# routed experts: (w13 parameter suffix, checkpoint names per expert e (gate, up), w2 suffix, checkpoint name (down));
# a class whose checkpoint stores them fused per projection ([E, ...] tensors) has `None` for e
EXPERTS = {'default': ('experts.routed_experts.w13_weight', ('experts.{e}.gate_proj.weight', 'experts.{e}.up_proj.weight'),
                       'experts.routed_experts.w2_weight', 'experts.{e}.down_proj.weight'),
           'Step3p5MTP': ('experts.routed_experts.w13_weight', ('gate_proj.weight', 'up_proj.weight'),   # `.moe.gate_proj.weight` [E, I, H]
                          'experts.routed_experts.w2_weight', 'down_proj.weight')}
FUSED_PER_PROJECTION = {'Step3p5MTP'}
# per class: (regex, replacement) applied in order to a draft parameter's name (shard names already split) -> checkpoint name;
# a replacement None drops the parameter (the class never loads it from the checkpoint: the target's, given by vLLM's proposer)
DS = [(r'^model\.layers\.(\d+)\.mtp_block\.', r'model.layers.\1.')]   # DeepSeek-style: the spec layer's block without `mtp_block`
RENAME = {
    'ExaoneMoeMTP': [(r'^model\.(?!embed_tokens)', 'mtp.')],
    'Exaone4_5_MTP': [(r'^model\.embed_tokens\.', 'model.language_model.embed_tokens.'), (r'^model\.(?!language_model)', 'mtp.')],
    'LongCatFlashMTPModel': [(r'^model\.layers\.0\.mtp_block\.mlp\.', 'model.mtp.layers.0.transformer_layer.mlp.'),
                             (r'^model\.layers\.0\.mtp_block\.', 'model.mtp.layers.0.'),
                             (r'^model\.layers\.0\.(enorm|hnorm)\.weight$', r'model.mtp.layers.0.\1.m.weight'),
                             (r'^model\.layers\.0\.eh_proj\.', 'model.mtp.layers.0.eh_proj.'),
                             (r'^model\.layers\.0\.final_layernorm\.weight$', 'model.mtp.norm.weight'),
                             (r'^model\.embed_tokens\.', 'model.mtp.embed_tokens.'), (r'^lm_head\.', None)],
    'MiMoV2MTPModel': [], 'MiMoV2OmniMTPModel': [],
    'NemotronHMTPModel': [(r'^model\.layers\.', 'mtp.layers.'), (r'^model\.embed_tokens\.weight$', 'backbone.embeddings.weight')],
    'Step3p5MTP': DS + [(r'\.moe\.experts\.routed_experts\.', '.moe.'), (r'\.shared_head\.head\.', '.shared_head.output.')],
    'OpenPanguMTPModel': DS + [(r'^model\.embed_tokens\.', 'model.layers.1.embed_tokens.')],
    'BailingMoeV25MTPModel': [(r'\.self_attn\.o_proj\.', '.attention.dense.'), (r'\.self_attn\.', '.attention.'),
                              (r'\.mlp\.gate\.expert_bias$', '.mlp.gate.e_score_correction_bias'),
                              (r'^model\.embed_tokens\.', 'model.word_embeddings.'),
                              (r'^model\.layers\.\d+\.shared_head\.head\.weight$', 'lm_head.weight')],
    'GlmOcrMTPModel': DS + [(r'^model\.layers\.', 'model.language_model.layers.'),
                            (r'^model\.language_model\.layers\.\d+\.shared_head\.head\.weight$', 'lm_head.weight')],
    'InternS2MobiusMTP': [(r'^model\.embed_tokens\.', 'model.language_model.embed_tokens.'), (r'^model\.(?!language_model)', 'mtp.')],
    'Gemma4MTPModel': [(r'^model\.(pre|post)_projection\.', r'\1_projection.')],
}
RENAME['BailingMoeV3MTPModel'] = RENAME['BailingMoeV25MTPModel']
KEYS = sorted(RENAME)
# classes whose real names vLLM itself cannot load (a KeyError in its own load_weights): recorded, not served
VLLM_CANNOT = {
    # its rewrite maps the MTP norm `model.mtp.norm.weight` to `final_layernorm.weight`, then prefixes it with the spec layer and moves
    # it into `mtp_block` (not a name of its spec-layer list), where the parameter is not
    'LongCatFlashMTPModel': r"^KeyError: 'model\.layers\.0\.mtp_block\.final_layernorm\.weight'$",
    # its expert mapping names `moe.experts.w13_weight` / `w2_weight`; vLLM 0.32's FusedMoE keeps them under `experts.routed_experts.`
    'Step3p5MTP': r"^KeyError: 'model\.layers\.1\.mtp_block\.moe\.experts\.w2_weight'$",
}


def _split_params(params: dict, shards: dict, key: str):
    "Yield `(name, shape, dtype)` of the checkpoint's tensors before renaming: merged linears split, routed experts split (or per projection)."
    w13, (g, u), w2, d = EXPERTS.get(key, EXPERTS['default'])
    for n, (shape, dtype) in params.items():
        if DERIVED.search(n): continue
        mod, _, leaf = n.rpartition('.')
        stem, _, fused = mod.rpartition('.')
        if mod in shards and fused in FUSED:
            for part, rows in zip(FUSED[fused], shards[mod], strict=True):
                yield f'{stem}.{part}.{leaf}', [rows, *shape[1:]], dtype
        elif n.endswith(w13):
            E, two_i, h = shape
            pre = n[:-len(w13)]
            if key in FUSED_PER_PROJECTION:
                for c in (g, u): yield pre + c, [E, two_i // 2, h], dtype
            else:
                for e in range(E):
                    for c in (g, u): yield pre + c.format(e=e), [two_i // 2, h], dtype
        elif n.endswith(w2):
            E, h, i = shape
            pre = n[:-len(w2)]
            if key in FUSED_PER_PROJECTION: yield pre + d, [E, h, i], dtype
            else:
                for e in range(E): yield pre + d.format(e=e), [h, i], dtype
        else:
            yield n, shape, dtype


def _rename(name: str, key: str) -> str | None:
    for pat, rep in RENAME[key]:
        if re.search(pat, name):
            if rep is None: return None
            name = re.sub(pat, rep, name)
    return name


def checkpoint_tensors(key: str, seed: int = 0) -> dict:
    "The tensors `{name: tensor}` of a real-named tiny checkpoint of class `key` (`LAYOUT`'s parameters, inverted per `RENAME`)."
    lay = json.loads(LAYOUT.read_text())[key]
    g = torch.Generator().manual_seed(seed)
    out = {}
    for n, shape, dtype in _split_params(lay['params'], lay['shards'], key):
        ck = _rename(n, key)
        if ck is None: continue
        if ck in out: raise ValueError(f"{key}: two draft parameters map to checkpoint tensor {ck}")
        t = torch.randn(*shape, generator=g) * 0.05
        if len(shape) == 1 and re.search(r'norm|layernorm', n) and n.endswith('.weight'): t = 1 + t   # norm weights near 1
        out[ck] = t.to(getattr(torch, dtype))
    return out


# the target's layer 0 beside the draft's: (the draft block's checkpoint prefix, the target layer's); its routed experts stored
# fused (`experts.gate_up_proj` [E, 2I, H], `experts.down_proj` [E, H, I]) where the draft's are split, as Qwen3.5-35B-A3B does
TARGET = {'ExaoneMoeMTP': ('mtp.layers.0.', 'model.layers.0.'), 'Exaone4_5_MTP': ('mtp.layers.0.', 'model.language_model.layers.0.'),
          'MiMoV2MTPModel': ('model.mtp.layers.0.', 'model.layers.0.'), 'MiMoV2OmniMTPModel': ('model.mtp.layers.0.', 'model.layers.0.'),
          'NemotronHMTPModel': ('mtp.layers.0.', 'backbone.layers.0.'), 'OpenPanguMTPModel': ('model.layers.1.', 'model.layers.0.'),
          'BailingMoeV25MTPModel': ('model.layers.1.', 'model.layers.0.'), 'BailingMoeV3MTPModel': ('model.layers.1.', 'model.layers.0.'),
          'GlmOcrMTPModel': ('model.language_model.layers.1.', 'model.language_model.layers.0.'),
          'InternS2MobiusMTP': ('mtp.layers.0.', 'model.language_model.layers.0.')}
MTP_ONLY = re.compile(r'\.(enorm|hnorm|eh_proj|shared_head|final_layernorm|embed_tokens)\.')   # parts of an MTP layer no target layer has
_SPLIT_EXPERT = re.compile(r'^(?P<stem>.+\.experts)\.(?P<e>\d+)\.(?P<p>gate_proj|up_proj|down_proj)\.weight$')


def target_layer(key: str, draft: dict) -> dict:
    "The target's layer 0 (`TARGET[key]`) made from the draft block's tensors `draft` (other values), its routed experts fused."
    if key not in TARGET: return {}
    src, dst = TARGET[key]
    out, experts = {}, {}
    for n, t in draft.items():
        if not n.startswith(src) or MTP_ONLY.search(n): continue
        n = dst + n[len(src):]
        if m := _SPLIT_EXPERT.match(n): experts.setdefault(m['stem'], {}).setdefault(m['p'], {})[int(m['e'])] = t; continue
        out[n] = (t.float() * -1).to(t.dtype)
    for stem, ps in experts.items():
        stack = lambda p: torch.stack([ps[p][e] for e in sorted(ps[p])])
        out[stem + '.gate_up_proj'] = torch.cat([stack('gate_proj'), stack('up_proj')], 1)
        out[stem + '.down_proj'] = stack('down_proj')
    return out


def tiny_real(key, dst) -> Path:
    "`generic_drafts.tiny_generic(key, dst)` with the real-named weights of `checkpoint_tensors(key)` and the target's `target_layer` (Gemma4: in its assistant checkpoint)."
    from safetensors.torch import save_file
    dst = gd.tiny_generic(key, dst)
    where = dst / 'assistant' if key in gd.ASSISTANT else dst
    sd = checkpoint_tensors(key)
    save_file({**sd, **target_layer(key, sd)}, str(where / 'model.safetensors'), metadata={'format': 'pt'})
    return dst


def assert_loaded_as_written(key: str, loaded: dict) -> int:
    "Each draft parameter `loaded` (as vLLM loaded it, before processing) stored whole under one checkpoint name equals the tensor written there; returns how many."
    lay, sd = json.loads(LAYOUT.read_text())[key], checkpoint_tensors(key)
    n_eq = 0
    for n, shape, _ in _split_params(lay['params'], lay['shards'], key):
        ck = _rename(n, key)
        if n not in loaded or ck not in sd: continue   # a shard or an expert of a merged parameter, or a parameter not loaded
        assert torch.equal(loaded[n], sd[ck]), f"{key}: parameter {n} != checkpoint tensor {ck}"
        n_eq += 1
    return n_eq


def assert_fp8_of(plain: dict, fp8_loaded: dict, fp8: dict, shards: dict, joint=()) -> list:
    """The FP8 draft's parameters against the same checkpoint loaded with no option: every parameter equal as loaded (before
    processing), and each e4m3 parameter of `fp8` (with its float32 `_scale`) bit-equal to mtp_lit's per-tensor quantisation of the
    BF16 one (linears: `quantize_shards` per merged shard; routed experts: `quantize_experts`, gate and up apart unless in `joint`).
    Returns the FP8 parameters' names."""
    from mtp_lit.draft_linear import quantize_shards
    from mtp_lit.draft_moe import quantize_experts
    assert set(plain) == set(fp8_loaded), sorted(set(plain) ^ set(fp8_loaded))
    for n, t in plain.items(): assert torch.equal(t, fp8_loaded[n]), f"{n}: loaded differently with MTP_FP8"
    names = sorted(n for n, t in fp8.items() if t.dtype == torch.float8_e4m3fn)
    for n in names:
        q, s, mod = fp8[n], fp8[n + '_scale'], n.rsplit('.', 1)[0]
        if q.dim() == 3: qq, ss = quantize_experts(plain[n], 'per-tensor', shards=1 if mod in joint or n.endswith('w2_weight') else 2)
        else: qq, ss = quantize_shards(plain[n], shards.get(mod, [q.shape[0]]), 'per-tensor')
        assert torch.equal(qq.view(torch.uint8), q.view(torch.uint8)) and torch.equal(ss.float(), s), f"{n}: not mtp_lit's e4m3 of the BF16 weight"
        assert q.view(torch.uint8).any(), n
    return names


DEEPSEEK_FP8 = json.loads((Path(__file__).parent / 'fixtures' / 'checkpoints' / 'DeepSeek-R1' / 'config.json').read_text())['quantization_config']
_FP8_LINEAR = re.compile(r'(_proj|\.dense|\.fc)\.weight$')
_BF16_KEPT = re.compile(r'\.(eh_proj|gate|embed_tokens|word_embeddings|embeddings|head|output)\.weight$|^lm_head\.')


def fp8_block(sd: dict) -> dict:
    """`sd` as a DeepSeek-style FP8 release stores it (`DEEPSEEK_FP8`): each projection weight (`*_proj`, `dense`, `fc`, split or fused
    experts) e4m3 in 128x128 blocks with its float32 `weight_scale_inv`; the router, `eh_proj`, embeddings, heads and norms BF16."""
    from mtp_lit.fp8 import quantize_fp8
    out = {}
    for n, t in sd.items():
        if t.dim() >= 2 and _FP8_LINEAR.search(n) and not _BF16_KEPT.search(n) or re.search(r'\.experts\.(gate_up|down)_proj$', n):
            q, s = quantize_fp8(t, 'block', block=(128, 128), name=n)
            stem = n.removesuffix('.weight')
            out[n], out[(stem + '.weight_scale_inv') if n.endswith('.weight') else n + '_scale_inv'] = q, s.float()
        else: out[n] = t
    return out


def tiny_real_fp8(key, dst) -> Path:
    "`tiny_real(key, dst)` as a DeepSeek-style block-FP8 release (`fp8_block`, the config's `quantization_config` = `DEEPSEEK_FP8`)."
    from safetensors.torch import load_file, save_file
    dst = tiny_real(key, dst)
    where = dst / 'assistant' if key in gd.ASSISTANT else dst
    save_file(fp8_block(load_file(str(where / 'model.safetensors'))), str(where / 'model.safetensors'), metadata={'format': 'pt'})
    cfg = json.loads((where / 'config.json').read_text()); cfg['quantization_config'] = DEEPSEEK_FP8
    (where / 'config.json').write_text(json.dumps(cfg, indent=1))
    return dst


# block-FP8 releases loaded with MTP_FP8: the refusal each gets (vLLM's own CPU build cannot load their FP8 linears without AMX)
FP8_BLOCK = {
    'OpenPanguMTPModel': r"^ValueError: env MTP_FP8: online FP8 quantizes BF16 draft weights at load time, but \S+/OpenPanguMTPModel stores "
                         r"\S+ in F8_E4M3, and mtp_lit has no layout for OpenPanguMTPModel checkpoints to tell the draft's tensors from the target's",
    'InternS2MobiusMTP': r"^ValueError: env MTP_FP8: online FP8 quantizes BF16 draft weights at load time, but \S+/InternS2MobiusMTP stores "
                         r"mtp\.\S+ in F8_E4M3 already; serve a checkpoint converted by `mtp-lit quantize`",
}


# classes whose real-named miniature gets no draft vocabulary (`mtp-lit draft-vocab`), and why
NO_DRAFT_VOCAB = {'Gemma4MTPModel': 'its draft is an assistant checkpoint of its own, with no rows in the target directory',
                  'OpenPanguMTPModel': 'the miniature stores the draft head (shared_head.head), not the target lm_head.weight the rows come from'}
DRAFT_VOCAB_KEYS = [k for k in KEYS if k not in VLLM_CANNOT and k not in NO_DRAFT_VOCAB]


def engine_args(key) -> dict:
    "`generic_drafts.engine_args(key)` reading the checkpoint's weights (no dummy load format)."
    ea = gd.engine_args(key); ea.pop('load_format')
    return ea


def derive(keys, workdir) -> dict:
    "Each class's draft parameters as vLLM builds them with no mtp_lit option (a dummy load): `{key: {'params', 'shards'}}`."
    from bad_inputs import load_drafts
    workdir = Path(workdir)
    cases = {k: (gd.tiny_generic(k, workdir / k), {}, 1, gd.engine_args(k), {'dump': str(workdir / f'{k}.safetensors')}) for k in keys}
    res = load_drafts(cases, workdir / 'work')
    bad = {k: r['error'] for k, r in res.items() if not r['loaded']}
    if bad: raise RuntimeError(f"derive: classes that did not build: {bad}")
    return {k: json.loads((workdir / f'{k}.safetensors.json').read_text()) for k in keys}


if __name__ == '__main__' and sys.argv[1:2] == ['--derive']:
    import tempfile
    keys = [k for k in gd.TINY_CONFIGS if k not in gd.REFUSED and k != 'MiniMaxM3MTP']
    with tempfile.TemporaryDirectory() as d: lay = derive(keys, d)
    LAYOUT.write_text(json.dumps(dict(sorted(lay.items())), indent=1) + '\n')
