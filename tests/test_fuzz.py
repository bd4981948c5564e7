"""Hypothesis properties of the pure functions bad inputs go through: tensor-name classification and rewriting (layouts,
convert), family detection, exclusion remapping (robustness and target safety; its main properties are in
02_layouts), safetensors header parsing, option parsing and draft-vocab id validation.

Every property runs a fixed, derandomized set of examples (reproducible in CI). `COUNTS` records how many examples each
one ran; they are printed at the end of the module (`pytest -s tests/test_fuzz.py`) and written to
`$PYTEST_TMP/hypothesis_counts.json`.
"""
import copy, json, re, struct, sys
from collections import Counter
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from mtp_lit.convert import fp8_scale_name, mtp_root, read_safetensors_header as convert_header, tiny_mtp_checkpoint
from mtp_lit.draft_vocab import validate_draft_vocab_ids
from mtp_lit.inspect_ckpt import _fixture_config, read_safetensors_header as inspect_header
from mtp_lit.layouts import (DTYPE_BITS, EXCLUSION_KEYS, FAMILIES, classify_tensor, detect_family, draft_layout,
                             draft_modules, exclusion_match, remap_exclusions, scale_target, synth_mtp_weights)
from mtp_lit.options import ENV_VARS, MtpLitOptions, parse_mtp_quant, parse_options

FIXTURES = Path(__file__).parent / 'fixtures' / 'checkpoints'
COUNTS = Counter()
FUZZ = dict(deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))


def _configs() -> dict:
    out = {}
    for d in sorted(FIXTURES.iterdir()):
        try: out[d.name] = _fixture_config(d)
        except FileNotFoundError: continue
    out['DeepSeek-R1 k=2'] = {**out['DeepSeek-R1'], 'num_nextn_predict_layers': 2}
    out['MiMo-7B k=2'] = {**out['MiMo-7B-Base'], 'num_nextn_predict_layers': 2}
    return out


CONFIGS = _configs()
LAYOUTS = {n: draft_layout(c) for n, c in CONFIGS.items()}
NAMES = sorted(CONFIGS)


@pytest.fixture(scope='module', autouse=True)
def _report(tmp_path_factory):
    yield
    path = tmp_path_factory.getbasetemp() / 'hypothesis_counts.json'
    path.write_text(json.dumps(dict(COUNTS), indent=1))
    print(f"\nhypothesis examples run: {dict(COUNTS)} (total {sum(COUNTS.values())}); {path}")


def _weights(name, experts='split'):
    "synth_mtp_weights of fixture config `name`, two experts per layer (0 and E-1) for speed."
    lay = LAYOUTS[name]
    ids = sorted({0, max((lay.num_experts or 1) - 1, 0)})
    return synth_mtp_weights(lay, experts, expert_ids=ids)


WEIGHTS = {(n, e): _weights(n, e) for n in NAMES for e in ('split', 'fused')}


# ---------------------------------------------------------------------------------------------- name classification
@settings(max_examples=400, **FUZZ)
@given(st.sampled_from(NAMES), st.sampled_from(['split', 'fused']), st.data())
def test_every_draft_tensor_and_its_scales_classify_consistently(cfg_name, experts, data):
    "A draft tensor of the config's own layout is a draft tensor; the scale names convert writes are its scales, same module."
    lay = LAYOUTS[cfg_name]
    w = data.draw(st.sampled_from(WEIGHTS[(cfg_name, experts)]))
    ti = classify_tensor(w['name'], w['shape'], w['dtype'], lay)
    COUNTS['classify: draft tensor + scales'] += 1
    assert ti.is_draft and not ti.is_scale and ti.vllm_module, ti
    if ti.mtp_index is not None:
        assert w['name'].startswith(lay.ckpt_prefix(ti.mtp_index) + '.')
        assert mtp_root(w['name'], lay) == ('mtp.' if w['name'].startswith('mtp.') else lay.ckpt_prefix(ti.mtp_index) + '.')
    fused = len(w['shape']) == 3
    if not (w['name'].endswith('.weight') and len(w['shape']) == 2) and not fused: return
    scheme = data.draw(st.sampled_from(['per-tensor', 'per-channel', 'block']))
    kinds = [(fp8_scale_name(w['name'], scheme), 'weight_scale_inv' if scheme == 'block' else 'weight_scale')]
    if not fused: kinds.append((w['name'][:-len('weight')] + 'input_scale', 'input_scale'))
    for sname, kind in kinds:
        assert scale_target(sname) == (w['name'], kind), (sname, scale_target(sname))
        si = classify_tensor(sname, [1], 'F32', lay)
        assert si.is_draft and si.is_scale and si.scale_of == w['name'] and si.scale_kind == kind, si
        assert (si.vllm_module, si.mtp_index, si.role) == (ti.vllm_module, ti.mtp_index, ti.role), (si, ti)


@settings(max_examples=300, **FUZZ)
@given(st.sampled_from(NAMES), st.integers(0, 200), st.sampled_from(['model.', 'model.language_model.', '']),
       st.sampled_from(['self_attn.q_proj.weight', 'mlp.gate_proj.weight', 'input_layernorm.weight', 'mlp.experts.3.up_proj.weight',
                        'self_attn.o_proj.weight_scale', 'linear_attn.in_proj_qkvz.weight', 'mlp.experts.down_proj']))
def test_target_layers_are_not_draft(cfg_name, j, pre, rest):
    "`model.layers.j.*` is the draft exactly when the family keeps its MTP layers there and N <= j < N + k."
    lay = LAYOUTS[cfg_name]
    N, k = lay.num_hidden_layers, lay.num_mtp_layers
    name = f'{pre}layers.{j}.{rest}'
    COUNTS['classify: target layers'] += 1
    expect = lay.family.ckpt_layer == 'model.layers.{n}' and N <= j < N + k and pre != ''
    if lay.family.ckpt_layer == 'model.layers.{n}' and pre == '': expect = N <= j < N + k     # the regex allows a bare `layers.`
    try: ti = classify_tensor(name, (lay.num_experts or 4, 8, 8) if rest == 'mlp.experts.down_proj' else (8, 8), 'BF16', lay)
    except ValueError as e:                              # only a draft tensor can be malformed (expert id / fused shape)
        assert expect and name in str(e), e; return
    assert ti.is_draft == expect, (name, ti)


NAME_ALPHABET = st.sampled_from(list('mtplayersexpro_.0123456789') + ['mtp.', 'layers.', 'experts.', '.weight', '_scale', '_scale_inv',
                                                                       '.weight_scale', 'model.', 'shared_head.', 'gate_up_proj'])


@settings(max_examples=600, **FUZZ)
@given(st.sampled_from(NAMES), st.lists(NAME_ALPHABET, max_size=14).map(''.join),
       st.lists(st.integers(0, 300), min_size=0, max_size=3), st.sampled_from(sorted(DTYPE_BITS)))
def test_classify_any_name_never_crashes(cfg_name, name, shape, dtype):
    "Junk names: a TensorInfo, or a ValueError naming the tensor; never another exception."
    COUNTS['classify: junk names'] += 1
    try: ti = classify_tensor(name, shape, dtype, LAYOUTS[cfg_name])
    except ValueError as e: assert name in str(e), e; return
    assert ti.name == name and ti.dtype == dtype
    if ti.is_scale: assert scale_target(name) == (ti.scale_of, ti.scale_kind)


@settings(max_examples=200, **FUZZ)
@given(st.sampled_from(NAMES))
def test_draft_modules_cover_every_draft_tensor(cfg_name):
    "Each linear draft tensor of the config's layout lands in a module `draft_modules` lists (what exclusions must match)."
    COUNTS['classify: modules covered'] += 1
    lay = LAYOUTS[cfg_name]
    mods = {m.vllm for m in draft_modules(lay)}
    for experts in ('split', 'fused'):
        for w in WEIGHTS[(cfg_name, experts)]:
            ti = classify_tensor(w['name'], w['shape'], w['dtype'], lay)
            if ti.role in ('norm', 'embed') or w['name'].endswith('bias'): continue
            assert ti.vllm_module in mods or ti.role == 'head', (w['name'], ti.vllm_module)


# ---------------------------------------------------------------------------------------------- detect_family
FAMILY_TYPES = sorted({t for f in FAMILIES for t in f.model_types})
FAMILY_ARCHS = sorted({a for f in FAMILIES for a in f.architectures})
JUNK = st.text(alphabet='abcdefgqwenmimodeepsk_0123456789FC', min_size=0, max_size=16)


@settings(max_examples=500, **FUZZ)
@given(st.one_of(st.sampled_from(FAMILY_ARCHS), JUNK), st.one_of(st.sampled_from(FAMILY_TYPES), JUNK, st.none()),
       st.booleans(), st.booleans())
def test_detect_family(arch, mtype, nested, empty_archs):
    "architectures[0] wins, then model_type (top level or text_config); else ValueError naming both fields."
    COUNTS['detect_family'] += 1
    cfg = {'architectures': [] if empty_archs else [arch]}
    if mtype is not None:
        if nested: cfg['text_config'] = {'model_type': mtype}
        else: cfg['model_type'] = mtype
    by_arch = next((f for f in FAMILIES if not empty_archs and arch in f.architectures), None)
    by_type = next((f for f in FAMILIES if mtype in f.model_types), None)
    want = by_arch or by_type
    if want is None:
        with pytest.raises(ValueError, match=r"architectures=.* model_type=.*: not an MTP family mtp_lit knows"): detect_family(cfg)
    else:
        assert detect_family(cfg) is want


@settings(max_examples=300, **FUZZ)
@given(st.sampled_from(NAMES), st.sampled_from(['num_hidden_layers', 'mtp_num_hidden_layers', 'num_nextn_predict_layers']),
       st.one_of(st.integers(-3, 100), st.booleans(), st.text(max_size=3), st.floats(allow_nan=True), st.none()))
def test_draft_layout_counts(cfg_name, key, value):
    "Layer counts: a DraftLayout, or a ValueError naming the field; a count of 0 MTP layers says there is no draft."
    COUNTS['draft_layout counts'] += 1
    cfg = copy.deepcopy(CONFIGS[cfg_name])
    holder = cfg['text_config'] if isinstance(cfg.get('text_config'), dict) else cfg
    holder[key] = value
    try: lay = draft_layout(cfg)
    except ValueError as e:
        assert 'config.json' in str(e) and any(k in str(e) for k in ('num_hidden_layers', 'mtp_num_hidden_layers', 'num_nextn_predict_layers',
                                                                      '_mtp')), e
        return
    assert lay.num_hidden_layers >= 0 and lay.num_mtp_layers >= 1


# ---------------------------------------------------------------------------------------------- remap_exclusions
REGEXY = st.lists(st.sampled_from(list('mtplayers.0123456789*?[]()+^$\\|_') + ['mtp.', 'layers.', 'mlp.', 'experts', 're:', 'model.']),
                  max_size=12).map(''.join)


@settings(max_examples=400, **FUZZ)
@given(st.sampled_from(NAMES), st.sampled_from([*EXCLUSION_KEYS, 'dynamic']), st.lists(REGEXY, max_size=6),
       st.sampled_from(['top', 'quantization', 'quantization_config']))
def test_remap_any_pattern_never_crashes(cfg_name, key, pats, where):
    "Arbitrary pattern text (regex metacharacters, `re:`): a remapped copy, or a ValueError naming the pattern; input untouched."
    COUNTS['remap: junk patterns'] += 1
    body = {'-:' + p: {} for p in pats} if key == 'dynamic' else list(pats)
    sec = {'quant_method': 'gptq' if key == 'dynamic' else 'modelopt', key: body}
    qc = sec if where == 'top' else {'quant_method': 'modelopt', where: sec}
    before = copy.deepcopy(qc)
    try: out = remap_exclusions(qc, CONFIGS[cfg_name])
    except ValueError as e:
        assert 'not a valid regex' in str(e) and any(repr(p) in str(e) or repr(p[3:]) in str(e) for p in pats), e; return
    assert qc == before
    assert remap_exclusions(out, CONFIGS[cfg_name]) == out


@settings(max_examples=300, **FUZZ)
@given(st.sampled_from(NAMES), st.sampled_from(list(EXCLUSION_KEYS)), st.data())
def test_remap_never_changes_the_target(cfg_name, key, data):
    "Patterns added for the draft never exclude a target module that was not excluded before."
    COUNTS['remap: target untouched'] += 1
    lay = LAYOUTS[cfg_name]; N = lay.num_hidden_layers
    mods = [m for m in draft_modules(lay) if m.kind != 'plain']
    shards = sorted({s for m in mods for s in (*m.shards, *m.fused_shards)})
    draft_pats = data.draw(st.lists(st.sampled_from(shards).flatmap(
        lambda s: st.sampled_from([s, s + '*', s.rpartition('.')[0] + '.*' if '.' in s else s])), max_size=5))
    qc = {'quant_method': 'fp8' if key == 'ignored_layers' else 'modelopt', key: draft_pats}
    out = remap_exclusions(qc, CONFIGS[cfg_name])
    targets = [f'{p}layers.{j}.{m}' for p in ('model.', 'model.language_model.') for j in (0, N // 2, max(N - 1, 0))
               for m in ('self_attn.qkv_proj', 'self_attn.o_proj', 'mlp.gate_up_proj', 'mlp.down_proj', 'mlp.experts', 'linear_attn.in_proj_qkvz')]
    targets += ['lm_head', 'model.embed_tokens']
    for t in targets:
        if exclusion_match(t, qc) is None: assert exclusion_match(t, out) is None, (t, exclusion_match(t, out), qc, out)


# ---------------------------------------------------------------------------------------------- safetensors headers
@pytest.fixture(scope='module')
def header_dir(tmp_path_factory): return tmp_path_factory.mktemp('headers')


@settings(max_examples=400, **FUZZ)
@given(st.one_of(st.binary(max_size=64),
                 st.builds(lambda n, body: struct.pack('<Q', n) + body, st.integers(0, 2**64 - 1), st.binary(max_size=48)),
                 st.builds(lambda hdr, pad: struct.pack('<Q', len(hdr)) + hdr + pad,
                           st.recursive(st.one_of(st.none(), st.integers(-5, 300), st.text(max_size=6)),
                                        lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(
                                            st.sampled_from(['a', 'b', 'dtype', 'shape', 'data_offsets', '__metadata__']), c, max_size=4)),
                                        max_leaves=8).map(lambda o: json.dumps(o).encode()),
                           st.binary(max_size=32))))
def test_safetensors_header_parsers(header_dir, raw):
    "Random bytes / lengths / JSON: both header readers return a parse or raise ValueError naming the file; nothing else."
    COUNTS['safetensors headers'] += 1
    f = header_dir / 'x.safetensors'; f.write_bytes(raw)
    for reader in (convert_header, inspect_header):
        try: reader(f)
        except ValueError as e: assert str(f) in str(e), e
        except (AttributeError, TypeError) as e:           # a JSON header that is not an object of objects
            pytest.fail(f"{reader.__module__}.read_safetensors_header({raw!r}): {type(e).__name__}: {e}")


# ---------------------------------------------------------------------------------------------- options
ENV_VALUES = st.one_of(st.sampled_from(['0', '1', 'true', 'off', 'yes', '', ' 64 ', '-1', '1.5', 'block', 'per-channel', 'rowwise',
                                        '0x10', '١٢', '+3', '2']), st.text(max_size=5))


@settings(max_examples=500, **FUZZ)
@given(st.dictionaries(st.sampled_from(sorted(ENV_VARS.values())), ENV_VALUES, max_size=4))
def test_parse_options_env(env):
    "Any environment: options, or a ValueError whose message starts with the variable's name."
    COUNTS['parse_options env'] += 1
    try: o = parse_options(None, env=env)
    except ValueError as e:
        assert any(str(e).startswith(v) for v in env), e; return
    assert isinstance(o, MtpLitOptions)
    assert o.draft_window >= 0 and o.draft_window_sinks >= 0 and (o.draft_window or not o.draft_window_sinks)
    assert set(o.sources) == {k for k, v in ENV_VARS.items() if env.get(v, '') != ''}


@settings(max_examples=300, **FUZZ)
@given(st.dictionaries(st.sampled_from(['mtp_quant_algo', 'mtp_quant_block_size', 'mtp_quant_scale_fmt', 'quantization_config']),
                       st.one_of(st.sampled_from(['FP8', 'fp8', 'NONE', 'BF16', 'INT3', 'ue8m0', 'float32']), st.none(), st.integers(-1, 256),
                                 st.lists(st.integers(-1, 256), max_size=3), st.just({'weight_block_size': [128, 128]})), max_size=4),
       st.booleans())
def test_parse_mtp_quant(cfg, nested):
    "Any mtp_quant_* fields (top level or text_config): a MtpQuant, or a ValueError naming the config.json field."
    COUNTS['parse_mtp_quant'] += 1
    c = {'text_config': cfg} if nested else cfg
    try: q = parse_mtp_quant(c)
    except ValueError as e: assert re.match(r"config.json (mtp_quant_(algo|block_size|scale_fmt)|quantization_config)", str(e)), e; return
    except (AttributeError, TypeError) as e: pytest.fail(f"parse_mtp_quant({c!r}): {type(e).__name__}: {e}")
    assert q.algo in ('FP8', 'NONE', 'BF16', 'FP16') and (q.scale_fmt != 'ue8m0' or q.block_size)


# ---------------------------------------------------------------------------------------------- draft vocab ids
@settings(max_examples=400, **FUZZ)
@given(st.lists(st.integers(-3, 70), max_size=12), st.integers(1, 64), st.sampled_from([torch.int64, torch.int32, torch.float32]))
def test_validate_draft_vocab_ids(ids, V, dtype):
    "Accepted exactly when 1-D int64, non-empty, in [0, V), unique and sorted; otherwise a ValueError starting with the name."
    COUNTS['validate_draft_vocab_ids'] += 1
    t = torch.tensor(ids, dtype=dtype)
    ok = dtype == torch.int64 and len(ids) > 0 and all(0 <= i < V for i in ids) and ids == sorted(set(ids))
    if ok: assert validate_draft_vocab_ids(t, V, 'f:ids') is t
    else:
        with pytest.raises(ValueError, match=r'^f:ids: '): validate_draft_vocab_ids(t, V, 'f:ids')
