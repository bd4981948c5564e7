"""The converter's output served by real vLLM CPU, and the layout conclusions of `mtp_lit.layouts` applied at load.

A. `mtp-lit quantize` on the trained MoE model (`checkpoint_path('qwen3_5_moe-tiny')`, split MTP experts) and on its fused variant
   (`mtp-lit fuse-experts`), per-tensor, per-channel and block scales (64x64 blocks: the experts have 64 rows per projection;
   UE8M0 scales, once stored as float32 powers of two and once as raw UE8M0 bytes): every run's greedy tokens equal plain
   decoding's, and online FP8 (`MTP_FP8=1` on the BF16 checkpoint) holds bit-identical draft weights and scales
   (`fp8_param_digests`) to the serialized checkpoint. 9 engines (~5 min on a 2-core machine).
B. A target quant config (`quant_method: fp8`, everything in `ignored_layers` under its *checkpoint* name, so the target runs
   unquantized on CPU) handed to the draft (`inherit`): mtp_lit remaps the exclusions onto the draft's modules (MiMo:
   `model.mtp_layers.0.*` is built as `model.layers.1.*`) and fixes the `mtp.fc` gap (Qwen3.5: BF16 `mtp.fc` missing from the
   list). Without mtp_lit the draft's BF16 modules are built with vLLM's FP8 method and loaded without scales: the draft
   silently proposes garbage (acceptance 0, seen for both cases; the MiMo one is a test). 3 engines."""
import json, shutil, sys
from pathlib import Path
import pytest
import torch
from safetensors.torch import load_file, save_file
sys.path.insert(0, str(Path(__file__).parent))
import tiny_families as tf
from mtp_lit.demo import run_in_subprocess, RunSpec, demo_prompts
from mtp_lit.model import checkpoint_path
from mtp_lit.convert import quantize, fuse_experts
from mtp_lit.fp8 import ue8m0_encode

pytestmark = pytest.mark.vllm
INSPECT = {'worker_extension_cls': 'mtp_lit.demo.DraftInspector'}
MOE = checkpoint_path('qwen3_5_moe-tiny')
PROMPTS = demo_prompts(4)

def _ue8m0_bytes(src: Path, dst: Path) -> Path:
    "A copy of the converted checkpoint `src` whose block scales are stored as UE8M0 bytes (uint8), as some checkpoints do."
    shutil.copytree(src, dst)
    t = load_file(str(dst / 'model.safetensors'))
    for k in [k for k in t if k.endswith('_scale_inv')]: t[k] = ue8m0_encode(t[k])
    save_file(t, str(dst / 'model.safetensors'), metadata={'format': 'pt'})
    return dst

def _block() -> tuple:
    "The largest of 128, 64, 32 dividing the MTP experts' rows per projection (the trained model's moe_intermediate_size)."
    I = json.loads((MOE / 'config.json').read_text())['moe_intermediate_size']
    return next((b, b) for b in (128, 64, 32) if I % b == 0)

@pytest.fixture(scope='module')
def converted(tmp_path_factory):
    root = tmp_path_factory.mktemp('conv')
    fused = fuse_experts(MOE, root / 'fused', to='fused', progress=False)
    out = {'split': MOE, 'fused': fused}
    for lay, src in (('split', MOE), ('fused', fused)):
        for scheme, fmt in (('per-tensor', 'float32'), ('per-channel', 'float32'), ('block', 'ue8m0')):
            out[f'{lay}-{scheme}'] = quantize(src, root / f'{lay}-{scheme}', scheme, fmt, _block(), progress=False)
    out['fused-block-u8'] = _ue8m0_bytes(out['fused-block'], root / 'fused-block-u8')
    return out

RUNS = [('plain', 'split', 0, {}), ('online-pt-split', 'split', 3, {'MTP_FP8': '1'}), ('ser-pt-split', 'split-per-tensor', 3, {}),
        ('online-pt-fused', 'fused', 3, {'MTP_FP8': '1'}), ('ser-pt-fused', 'fused-per-tensor', 3, {}),
        ('online-pc-split', 'split', 3, {'MTP_FP8': '1', 'MTP_FP8_SCHEME': 'per-channel'}), ('ser-pc-fused', 'fused-per-channel', 3, {}),
        ('ser-block-split', 'split-block', 3, {}), ('ser-block-fused-u8', 'fused-block-u8', 3, {})]

@pytest.fixture(scope='module')
def runs(converted, tmp_path_factory):
    logs = tmp_path_factory.mktemp('logs')
    return {name: run_in_subprocess(RunSpec(name, str(converted[ck]), k, env, PROMPTS, 32, 1024, engine_args=INSPECT), log_dir=logs, quiet=True)
            for name, ck, k, env in RUNS}

def test_converted_checkpoints_serve_with_greedy_output_unchanged(runs):
    plain = runs['plain']['tokens']
    for name, r in runs.items():
        assert r['tokens'] == plain, name
        if r['k']:
            assert r['acceptance']['drafts'] > 0, name
            print(f"{name:20} acceptance rate {r['acceptance']['acceptance_rate']:.3f}, mean acceptance length {r['acceptance']['mean_acceptance_length']:.2f}")

def test_experts_and_linears_in_fp8(runs):
    for name, r in runs.items():
        if not r['k']: continue
        dts = r['draft']['param_dtypes']
        for p in ('model.layers.0.mlp.experts.routed_experts.w13_weight', 'model.layers.0.mlp.experts.routed_experts.w2_weight',
                  'model.fc.weight', 'model.layers.0.self_attn.qkv_proj.weight', 'model.layers.0.mlp.shared_expert.gate_up_proj.weight'):
            assert dts[p] == 'float8_e4m3fn', (name, p)

def test_online_fp8_is_bit_identical_to_the_converter(runs):
    dg = {name: r['draft']['fp8_digests'] for name, r in runs.items() if r['k']}
    assert len(dg['online-pt-split']) == 7
    assert dg['online-pt-split'] == dg['ser-pt-split']
    assert dg['online-pt-fused'] == dg['ser-pt-fused']
    assert dg['online-pc-split'] == dg['ser-pc-fused']                # per-channel: split and fused layouts agree too
    assert dg['ser-block-split'] == dg['ser-block-fused-u8']          # block: layouts agree; UE8M0 bytes read as 2^(b-127)
    # per-tensor: a fused gate_up_proj has one scale for gate and up, so only the experts' w13 differs between layouts
    diff = {p for p in dg['ser-pt-split'] if dg['ser-pt-split'][p] != dg['ser-pt-fused'][p]}
    assert diff == {'model.layers.0.mlp.experts.routed_experts.w13_weight'}

# --- B. the target's quant config, as the draft must read it

def _expected(n):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(checkpoint_path('qwen3_5-tiny') / 'tokenizer.json'))
    return [tf.expected_tokens(tok.encode(p).ids, n) for p in PROMPTS[:2]]

def test_checkpoint_named_exclusions_remapped_for_the_draft(tmp_path):
    ck = tf.with_fp8_exclusions(tf.build('mimo', tmp_path / 'mimo'))
    r = run_in_subprocess(RunSpec('mimo-inherit', str(ck), 3, {}, PROMPTS[:2], 24, 512, engine_args=INSPECT), log_dir=tmp_path, quiet=True)
    log = Path(r['log']).read_text()
    line = next(l for l in log.splitlines() if "exclusions remapped to the draft's modules" in l)
    assert "ignored_layers 'model.layers.1.self_attn.qkv_proj'" in line and "ignored_layers 'model.layers.1.mlp.gate_up_proj'" in line
    assert 'float8_e4m3fn' not in r['draft']['param_dtypes'].values()
    assert r['tokens'] == _expected(24) and r['acceptance']['acceptance_rate'] > 0.95

def test_without_mtp_lit_the_checkpoint_named_exclusions_miss_the_draft(tmp_path):
    "The same checkpoint with every plugin off: vLLM builds the BF16 draft layer as FP8 and loads it without scales (acceptance 0)."
    ck = tf.with_fp8_exclusions(tf.build('mimo', tmp_path / 'mimo'))
    r = run_in_subprocess(RunSpec('mimo-no-plugin', str(ck), 3, {'VLLM_PLUGINS': ''}, PROMPTS[:2], 24, 512, engine_args=INSPECT),
                          log_dir=tmp_path, quiet=True)
    assert r['draft']['class'].startswith('vllm.model_executor.models.mimo_mtp.')
    assert 'float8_e4m3fn' in r['draft']['param_dtypes'].values()
    assert r['acceptance']['drafts'] > 0 and r['acceptance']['acceptance_rate'] < 0.05, r['acceptance']
    assert r['tokens'] == _expected(24)                              # lossless, but the draft is useless

def test_bf16_mtp_fc_gap_fixed_for_the_draft(tmp_path):
    ck = tf.with_fp8_exclusions(tf.build('qwen3_5', tmp_path / 'q'), omit=('mtp.fc',))
    r = run_in_subprocess(RunSpec('fc-gap', str(ck), 3, {}, PROMPTS[:2], 24, 512, engine_args=INSPECT), log_dir=tmp_path, quiet=True)
    log = Path(r['log']).read_text()
    assert 'gap bf16_not_excluded at mtp.fc.weight' in log and "excluded from the draft's quant config: mtp.fc" in log
    assert r['draft']['param_dtypes']['model.fc.weight'] == 'bfloat16'
    assert r['tokens'] == _expected(24) and r['acceptance']['acceptance_rate'] > 0.95
