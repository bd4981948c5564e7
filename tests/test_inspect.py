"""`mtp-lit inspect` end to end: the console script on header-only skeletons of every fixture checkpoint.

The skeletons (`make_skeleton`) are sparse safetensors files with the real names, shapes and dtypes; the command must
read their headers only (checked with a 100 GB tensor) and find the facts the fixtures are known for.
"""
import json, shutil, subprocess, sys, time
from pathlib import Path
import pytest
from mtp_lit.inspect_ckpt import inspect_checkpoint, make_skeleton

FIX = Path(__file__).parent / 'fixtures' / 'checkpoints'
BASES = {'Qwen3.6-35B-A3B': 'Qwen3.5-35B-A3B', 'nvidia-DeepSeek-V3-0324-NVFP4': 'DeepSeek-V3'}
CLI = shutil.which('mtp-lit', path=str(Path(sys.executable).parent))


def skeleton(name, tmp_path, **kw):
    return make_skeleton(FIX / name, tmp_path / name, base=FIX / BASES[name] if name in BASES else None, **kw) and tmp_path / name


@pytest.mark.parametrize("name", sorted(p.name for p in FIX.iterdir() if p.is_dir()))
def test_inspect_every_fixture(name, tmp_path):
    r = inspect_checkpoint(skeleton(name, tmp_path))
    assert r['mtp_layers'] == 1 and r['draft_tensors'] > 0
    assert r['read']['header_bytes'] < 1_000_000 < r['read']['data_bytes']
    gaps = [(g['kind'], g['tensor']) for g in r['gaps']]
    if name == 'nvidia-Qwen3.5-397B-A17B-NVFP4': assert gaps == [('bf16_not_excluded', 'mtp.fc.weight')]
    elif name != 'DeepSeek-V3': assert gaps == [], gaps          # DeepSeek-V3's weight list elides layer 61's attention/MoE


@pytest.mark.skipif(CLI is None, reason="console script mtp-lit not installed")
def test_cli_json_on_100gb_skeleton(tmp_path):
    d = skeleton('DeepSeek-R1', tmp_path, extra={'model.layers.0.mlp.experts.w13_weight': ((50_000, 1_000_000), 'BF16')})
    t0 = time.perf_counter()
    p = subprocess.run([CLI, 'inspect', str(d), '--json'], capture_output=True, text=True, timeout=120)
    wall = time.perf_counter() - t0
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    print(f"mtp-lit inspect on {r['read']['data_bytes'] / 1e9:.0f} GB: {r['read']['header_bytes']:,} header bytes, "
          f"read in {r['read']['seconds'] * 1e3:.0f} ms, {wall:.2f} s wall (process start included)")
    assert (r['family'], r['layers'][0]['checkpoint'], r['expert_layout'], r['gaps']) == ('deepseek_v3', 'model.layers.61', {'0': 'split'}, [])
    assert r['quant']['describe'] == 'FP8 block 128x128'
    assert r['read']['data_bytes'] > 100e9 and r['read']['header_bytes'] < 1_000_000


@pytest.mark.skipif(CLI is None, reason="console script mtp-lit not installed")
def test_cli_errors_name_the_file(tmp_path):
    p = subprocess.run([CLI, 'inspect', str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and 'config.json: not found' in p.stderr


# Every checkpoint of the project's shared metadata (`../shared/checkpoints`, a superset of the fixtures as it grows): a skeleton
# of each, and its config alone, must be reported without a refusal (no error, no gap whose fix is to refuse the load)
SHARED = Path(__file__).resolve().parents[2] / 'shared' / 'checkpoints'
SHARED_DIRS = sorted(p.name for p in SHARED.iterdir() if p.is_dir()) if SHARED.is_dir() else []
ELIDED = {'DeepSeek-V3'}      # its weight list elides layer 61's attention/MoE (the source printed `| ... |`): those modules are missing


@pytest.mark.skipif(not SHARED_DIRS, reason=f"no {SHARED} on this machine")
@pytest.mark.parametrize("name", SHARED_DIRS)
def test_inspect_every_shared_checkpoint(name, tmp_path):
    src = SHARED / name
    cfg = next((f for f in ('config.json', 'config.transformers_dump_from_report.json') if (src / f).exists()), None)
    base = SHARED / BASES[name] if cfg is None and name in BASES else None
    if cfg is None and base is None: pytest.skip(f"{src}: no config.json and no sibling known to share its architecture")
    d = make_skeleton(src, tmp_path / name, base=base) and tmp_path / name
    for target in (d, tmp_path / 'config-only'):
        if target != d: target.mkdir(); shutil.copy(d / 'config.json', target / 'config.json')
        r = inspect_checkpoint(target)
        from mtp_lit.inspect_ckpt import format_report
        assert format_report(r) and 'error' not in r['mtp_lit'], r['mtp_lit']
        assert r['mtp_layers'] >= 1 and r['layers'][0]['tensors'] > 0 and r['draft_tensors'] > 0
        refused = [(g['kind'], g['tensor']) for g in r['gaps'] if g['fix'].startswith('refuse')]
        assert refused == [] or name in ELIDED, refused


def test_inspect_multimodal_layout(tmp_path):
    "The released Qwen3.5 layout (`tiny_families.build_multimodal`): language model under `model.language_model.*`, `mtp.*` beside it."
    sys.path.insert(0, str(Path(__file__).parent))
    import tiny_families as tf
    r = inspect_checkpoint(tf.build_multimodal('qwen3_5_moe', tmp_path / 'mm', experts='fused'))
    assert (r['family'], r['mtp_layers'], r['layers'][0]['checkpoint'], r['layers'][0]['tensors'], r['expert_layout'], r['gaps']) == (
        'qwen3_5_moe', 1, 'mtp.layers.0', 15, {'0': 'fused'}, [])
    assert r['draft_globals'] == ['mtp.fc', 'mtp.norm', 'mtp.pre_fc_norm_embedding', 'mtp.pre_fc_norm_hidden'] and r['head'] == 'lm_head.weight'


def _holes(tensors):
    from mtp_lit.ckpt_io import TensorOut
    from mtp_lit.layouts import tensor_nbytes
    return {n: TensorOut(n, dt, list(s), tensor_nbytes(s, dt), None) for n, (s, dt) in tensors.items()}


def test_inspect_dsa_fp8_indexer(tmp_path):
    "DeepSeek-V3.2 / GLM-5 as released: the MTP layer's indexer `wk` FP8 with its block scale, `weights_proj` BF16 (vLLM dequantizes wk into wk_weights_proj)."
    from mtp_lit.ckpt_io import write_checkpoint
    from mtp_lit.layouts import synth_mtp_weights
    cfg = {'architectures': ['DeepseekV32ForCausalLM'], 'model_type': 'deepseek_v32', 'hidden_size': 256, 'intermediate_size': 512,
           'moe_intermediate_size': 64, 'n_routed_experts': 8, 'n_shared_experts': 1, 'num_experts_per_tok': 2, 'first_k_dense_replace': 1,
           'num_attention_heads': 4, 'num_key_value_heads': 4, 'num_hidden_layers': 3, 'num_nextn_predict_layers': 1, 'q_lora_rank': 96,
           'kv_lora_rank': 64, 'qk_nope_head_dim': 32, 'qk_rope_head_dim': 16, 'v_head_dim': 32, 'vocab_size': 1000, 'topk_method': 'noaux_tc',
           'index_head_dim': 32, 'index_n_heads': 4, 'index_topk': 64,
           'quantization_config': {'quant_method': 'fp8', 'activation_scheme': 'dynamic', 'scale_fmt': 'ue8m0', 'weight_block_size': [128, 128]}}
    ts = {}
    for w in synth_mtp_weights(cfg):
        n, s = w['name'], tuple(w['shape'])
        if len(s) == 2 and n.endswith('.weight') and not any(x in n for x in ('eh_proj', 'shared_head', 'embed_tokens', 'mlp.gate.', 'weights_proj')):
            ts[n] = (s, 'F8_E4M3'); ts[n[:-len('weight')] + 'weight_scale_inv'] = ((-(-s[0] // 128), -(-s[1] // 128)), 'F32')
        else: ts[n] = (s, w['dtype'])
    assert ts['model.layers.3.self_attn.indexer.wk.weight'][1] == 'F8_E4M3' and ts['model.layers.3.self_attn.indexer.weights_proj.weight'][1] == 'BF16'
    tgt = {'model.embed_tokens.weight': ((1000, 256), 'BF16'), 'model.norm.weight': ((256,), 'BF16'), 'lm_head.weight': ((1000, 256), 'BF16')}
    d = write_checkpoint(tmp_path / 'v32', cfg, _holes({**tgt, **ts}), shards=2, last=list(ts))
    r = inspect_checkpoint(d)
    assert (r['family'], r['mtp_layers'], r['gaps']) == ('deepseek_v32', 1, []), r['gaps']
    mods = {m['module']: (m['kind'], m['quant']) for m in r['modules']}
    assert mods['model.layers.3.self_attn.indexer.wk_weights_proj'] == ('plain', None)
    assert mods['model.layers.3.self_attn.indexer.wq_b'] == ('linear', 'FP8')
    # a DSA checkpoint whose MTP layer lacks the indexer vLLM builds there: reported, naming the module
    r = inspect_checkpoint(write_checkpoint(tmp_path / 'noidx', cfg, _holes({**tgt, **{n: v for n, v in ts.items() if '.indexer.' not in n}}), shards=2))
    assert ('missing_draft', 'model.layers.3.self_attn.indexer.wq_b') in [(g['kind'], g['tensor']) for g in r['gaps']]


def test_inspect_compressed_tensors_packed(tmp_path):
    "A compressed-tensors NVFP4 (pack-quantized) draft stores `weight_packed` beside `weight_scale` / `weight_global_scale` / `input_global_scale`."
    from mtp_lit.ckpt_io import write_checkpoint
    from mtp_lit.layouts import synth_mtp_weights
    tc = {'model_type': 'qwen3_5_text', 'hidden_size': 256, 'intermediate_size': 512, 'num_hidden_layers': 4, 'vocab_size': 1000, 'head_dim': 64,
          'num_attention_heads': 4, 'num_key_value_heads': 2, 'mtp_num_hidden_layers': 1, 'attn_output_gate': True}
    qc = {'quant_method': 'compressed-tensors', 'format': 'nvfp4-pack-quantized', 'ignore': ['lm_head', 're:.*linear_attn.*', 'mtp.fc'],
          'config_groups': {'group_0': {'targets': ['Linear'], 'weights': {'num_bits': 4, 'type': 'float', 'strategy': 'tensor_group', 'group_size': 16},
                                        'input_activations': {'num_bits': 4, 'type': 'float', 'strategy': 'tensor_group', 'group_size': 16, 'dynamic': 'local'}}}}
    cfg = {'architectures': ['Qwen3_5ForConditionalGeneration'], 'model_type': 'qwen3_5', 'text_config': tc, 'quantization_config': qc}
    ts = {}
    for w in synth_mtp_weights(cfg):
        n, s = w['name'], tuple(w['shape'])
        if len(s) == 2 and n.endswith('.weight') and n != 'mtp.fc.weight':
            b = n[:-len('weight')]
            ts.update({b + 'weight_packed': ((s[0], s[1] // 2), 'U8'), b + 'weight_scale': ((s[0], s[1] // 16), 'F8_E4M3'),
                       b + 'weight_global_scale': ((1,), 'F32'), b + 'input_global_scale': ((1,), 'F32')})
        else: ts[n] = (s, w['dtype'])
    tgt = {'model.language_model.embed_tokens.weight': ((1000, 256), 'BF16'), 'model.language_model.norm.weight': ((256,), 'BF16'), 'lm_head.weight': ((1000, 256), 'BF16')}
    r = inspect_checkpoint(write_checkpoint(tmp_path / 'ct', cfg, _holes({**tgt, **ts}), shards=2, last=list(ts)))
    assert (r['family'], r['gaps']) == ('qwen3_5', []), r['gaps']
    assert {m['module']: (m['stored'], m['quant']) for m in r['modules']}['mtp.layers.0.self_attn.qkv_proj'] == (['U8'], 'NVFP4')
    # its weight_scale lost: the gap names the missing scale
    del ts['mtp.layers.0.self_attn.o_proj.weight_scale']
    r = inspect_checkpoint(write_checkpoint(tmp_path / 'ct2', cfg, _holes({**tgt, **ts}), shards=2, last=list(ts)))
    assert [(g['kind'], g['tensor']) for g in r['gaps']] == [('missing_scale', 'mtp.layers.0.self_attn.o_proj.weight_scale')]


def test_exclusion_of_unquantized_draft_modules_is_no_typo(tmp_path):
    "ModelOpt / compressed-tensors lists name the MTP layer's eh_proj, router and norms (never quantized): right, no 'typo' warning; a real typo still warns."
    import warnings
    from mtp_lit.layouts import remap_exclusions
    cfg = json.loads((SHARED / 'DeepSeek-R1' / 'config.json').read_text()) if (SHARED / 'DeepSeek-R1').is_dir() else None
    if cfg is None: pytest.skip('no shared DeepSeek-R1 config')
    cfg = {k: v for k, v in cfg.items() if k != 'quantization_config'}
    ok = ['lm_head', 'model.layers.61.eh_proj', 'model.layers.61.mlp.gate', 'model.layers.61.enorm', 'model.layers.61.shared_head.norm',
          'model.layers.61.input_layernorm', 'model.layers.61.shared_head.head', 'model.layers.61.self_attn*']
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        remap_exclusions({'quantization': {'quant_algo': 'NVFP4', 'group_size': 16, 'exclude_modules': ok}}, cfg)
    assert [str(x.message) for x in w] == []
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        remap_exclusions({'quantization': {'quant_algo': 'NVFP4', 'group_size': 16, 'exclude_modules': ok + ['model.layers.61.eh_prj']}}, cfg)
    assert len(w) == 1 and "'model.layers.61.eh_prj'" in str(w[0].message)


GLM_CT = {'architectures': ['Glm4MoeForCausalLM'], 'model_type': 'glm4_moe', 'hidden_size': 256, 'intermediate_size': 512, 'head_dim': 64,
          'moe_intermediate_size': 64, 'n_routed_experts': 8, 'n_shared_experts': 1, 'num_experts_per_tok': 2, 'first_k_dense_replace': 1,
          'num_attention_heads': 8, 'num_key_value_heads': 2, 'num_hidden_layers': 3, 'num_nextn_predict_layers': 1, 'attention_bias': True,
          'partial_rotary_factor': 0.5, 'vocab_size': 1000, 'topk_method': 'noaux_tc'}


def _ct_fp8(strategy, **w):
    return {'quant_method': 'compressed-tensors', 'format': 'float-quantized', 'ignore': ['lm_head', 're:.*mlp.gate$'],
            'config_groups': {'group_0': {'targets': ['Linear'], 'weights': {'num_bits': 8, 'type': 'float', 'strategy': strategy, 'symmetric': True, 'dynamic': False, **w},
                                          'input_activations': {'num_bits': 8, 'type': 'float', 'strategy': 'token', 'dynamic': True}}}}


def test_inspect_compressed_tensors_fp8_strategy(tmp_path):
    "compressed-tensors FP8 is named by its weights' `strategy`: per-channel (`weight_scale [out, 1]`), per-tensor, block."
    from mtp_lit.ckpt_io import write_checkpoint
    from mtp_lit.layouts import synth_mtp_weights, quant_scheme
    cfg = {**GLM_CT, 'quantization_config': _ct_fp8('channel')}
    ts = {}
    for w in synth_mtp_weights(cfg):
        n, s = w['name'], tuple(w['shape'])
        if len(s) == 2 and n.endswith('.weight') and not any(x in n for x in ('eh_proj', 'shared_head', 'mlp.gate.', 'embed_tokens')):
            ts[n] = (s, 'F8_E4M3'); ts[n[:-len('weight')] + 'weight_scale'] = ((s[0], 1), 'BF16')
        else: ts[n] = (s, w['dtype'])
    tgt = {'model.embed_tokens.weight': ((1000, 256), 'BF16'), 'model.norm.weight': ((256,), 'BF16'), 'lm_head.weight': ((1000, 256), 'BF16')}
    r = inspect_checkpoint(write_checkpoint(tmp_path / 'ch', cfg, _holes({**tgt, **ts}), shards=2, last=list(ts)))
    assert (r['family'], r['gaps'], r['quant']['describe']) == ('glm4_moe', [], 'FP8 per-channel (dynamic activations)'), r['gaps']
    assert {m['module']: m['why'] for m in r['modules']}['model.layers.3.self_attn.o_proj'] == 'FP8 per-channel (dynamic activations)'
    assert quant_scheme(_ct_fp8('tensor')).describe() == 'FP8 per-tensor (dynamic activations)'
    assert quant_scheme(_ct_fp8('block', block_structure=[128, 128])).describe() == 'FP8 block 128x128'


@pytest.mark.parametrize("field", ['hidden_size', 'vocab_size'])
def test_inspect_config_lacking_a_dimension(field, tmp_path):
    "A config.json without hidden_size / vocab_size: the draft is still described; the bytes-per-step warning names the file and the field."
    import warnings
    from mtp_lit.ckpt_io import write_checkpoint
    from mtp_lit.layouts import synth_mtp_weights
    ts = {w['name']: (tuple(w['shape']), w['dtype']) for w in synth_mtp_weights(GLM_CT)}
    tgt = {'model.embed_tokens.weight': ((1000, 256), 'BF16'), 'model.norm.weight': ((256,), 'BF16'), 'lm_head.weight': ((1000, 256), 'BF16')}
    cfg = {k: v for k, v in GLM_CT.items() if k != field}
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        r = inspect_checkpoint(write_checkpoint(tmp_path / field, cfg, _holes({**tgt, **ts}), shards=1))
    assert (r['family'], r['draft_tensors'], r['bytes_per_draft_step']) == ('glm4_moe', len(ts), None)
    assert r['warnings'] == [f'bytes per draft step not computed: config.json has no {field}, needed for the bytes of a draft step']


def test_inspect_mimo_v2_builds_one_mtp_layer(tmp_path):
    "MiMo-V2-Flash stores 3 MTP layers and says so; vLLM's MiMoV2MTP builds one (a fixed count): a note names the layers it will not read."
    import warnings
    from mtp_lit.ckpt_io import write_checkpoint
    from mtp_lit.layouts import synth_mtp_weights, draft_layout
    cfg = {'architectures': ['MiMoV2FlashForCausalLM'], 'model_type': 'mimo_v2_flash', 'hidden_size': 256, 'intermediate_size': 512,
           'num_attention_heads': 8, 'num_key_value_heads': 4, 'head_dim': 48, 'v_head_dim': 32, 'swa_num_attention_heads': 8,
           'swa_num_key_value_heads': 8, 'swa_head_dim': 48, 'swa_v_head_dim': 32, 'sliding_window': 128, 'num_hidden_layers': 4,
           'num_nextn_predict_layers': 3, 'vocab_size': 1000, 'add_swa_attention_sink_bias': True, 'hybrid_layer_pattern': [0, 1, 1, 1],
           'layernorm_epsilon': 1e-5}
    assert draft_layout(cfg).num_mtp_layers == 1
    l0 = {w['name']: (tuple(w['shape']), w['dtype']) for w in synth_mtp_weights(cfg)}
    ts = {n.replace('mtp.layers.0.', f'mtp.layers.{i}.'): v for i in range(3) for n, v in l0.items()}
    tgt = {'model.embed_tokens.weight': ((1000, 256), 'BF16'), 'model.norm.weight': ((256,), 'BF16'), 'lm_head.weight': ((1000, 256), 'BF16')}
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        r = inspect_checkpoint(write_checkpoint(tmp_path / 'mimo2', cfg, _holes({**tgt, **ts}), shards=2, last=list(ts)))
    assert [str(x.message) for x in w] == []
    assert (r['family'], r['mtp_layers'], r['mtp_count_key'], r['mtp_layers_in_weights'], r['gaps']) == ('mimo_v2', 1, 'num_nextn_predict_layers', 3, [])
    assert [(l['checkpoint'], l['vllm_params'], l['tensors']) for l in r['layers']] == [('model.mtp.layers.0', 'model.mtp.layers.0', len(l0))]
    assert r['mtp_layers_note'] == ("config.json num_nextn_predict_layers=3, but vLLM's MiMoV2MTP builds 1 MTP layer(s) (fixed in mimo_v2_mtp.py); "
                                    "it will not read the stored model.mtp.layers.1 .. model.mtp.layers.2")
    assert {m['module'].split('.')[3] for m in r['modules']} == {'0'}
    # no count in the config: the weights' 2 layers, of which vLLM reads the first
    cfg2 = {k: v for k, v in cfg.items() if k != 'num_nextn_predict_layers'}
    ts2 = {n: v for n, v in ts.items() if 'layers.2.' not in n}
    r = inspect_checkpoint(write_checkpoint(tmp_path / 'mimo2b', cfg2, _holes({**tgt, **ts2}), shards=1))
    assert (r['mtp_layers'], r['mtp_count_key'], r['mtp_layers_note']) == (1, 'from the weights', "the weights hold 2 MTP layers, but vLLM's MiMoV2MTP "
                                                                           "builds 1 MTP layer(s) (fixed in mimo_v2_mtp.py); it will not read the stored model.mtp.layers.1")


def test_fp8_draft_under_a_config_that_announces_none(tmp_path):
    "A converted checkpoint whose config.json was replaced by the BF16 original: its e4m3 draft is a gap, not 'unquantized'."
    from mtp_lit.convert import quantize
    from mtp_lit.model import checkpoint_path
    q = quantize(checkpoint_path(), tmp_path / 'q', 'per-channel', progress=False)
    assert [g['kind'] for g in inspect_checkpoint(q)['gaps']] == []
    shutil.copy(checkpoint_path() / 'config.json', q / 'config.json')
    gaps = inspect_checkpoint(q)['gaps']
    assert [(g['kind'], g['tensor']) for g in gaps] == [('quantized_unannounced', 'mtp.fc.weight')], gaps
    assert 'declares no quantization' in gaps[0]['detail']
