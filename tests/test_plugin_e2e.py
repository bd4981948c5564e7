"""End to end on real vLLM: the plugin is discovered through its entry point, the FP8 draft runs in FP8,
greedy output is unchanged, vLLM without mtp_lit options is unchanged, bad options fail with their names."""
import json, shutil
from pathlib import Path
import pytest
from safetensors import safe_open
from safetensors.torch import save_file
from mtp_lit.demo import demo, run_in_subprocess, RunSpec, demo_prompts
from mtp_lit.model import checkpoint_path

pytestmark = pytest.mark.vllm
CKPT = str(checkpoint_path('qwen3_5-tiny'))
PROMPTS = demo_prompts(4)

@pytest.fixture(scope='module')
def runs(demo_runs): return demo_runs

def test_plugin_discovered_through_entry_point(runs):
    # this test module never imports mtp_lit.plugin: vLLM found it through the `vllm.general_plugins` entry point
    log = Path(runs['mtp-fp8']['log']).read_text()
    assert 'mtp_lit: Qwen3_5MTP draft from' in log   # logged as the draft loads (the register() line goes to a process
                                                     # whose logging vLLM configures later: not shown in-process)
    assert runs['mtp-fp8']['draft']['class'] == 'mtp_lit.plugin.Qwen3_5MTP'

def test_fp8_draft_linears_are_e4m3(runs):
    dt = runs['mtp-fp8']['draft']['param_dtypes']
    for name in ['model.fc.weight', 'model.layers.0.self_attn.qkv_proj.weight', 'model.layers.0.self_attn.o_proj.weight',
                 'model.layers.0.mlp.gate_up_proj.weight', 'model.layers.0.mlp.down_proj.weight']:
        assert dt[name] == 'float8_e4m3fn', (name, dt[name])
        assert dt[name + '_scale'] == 'float32'
    assert dt['model.norm.weight'] == 'bfloat16' and dt['model.pre_fc_norm_hidden.weight'] == 'bfloat16'
    # the BF16 run's draft is untouched
    assert 'float8_e4m3fn' not in runs['mtp-bf16']['draft']['param_dtypes'].values()
    # draft linear bytes roughly halve (1 byte per weight + a few float32 scales vs 2 bytes)
    b16, b8 = runs['mtp-bf16']['draft']['linear_weight_bytes'], runs['mtp-fp8']['draft']['linear_weight_bytes']
    assert 0.49 < b8 / b16 < 0.52, (b16, b8)

def test_greedy_tokens_identical(runs):
    plain = runs['plain']['tokens']
    assert runs['mtp-bf16']['tokens'] == plain
    assert runs['mtp-fp8']['tokens'] == plain
    assert runs['mtp-fp8']['acceptance']['drafts'] > 0

def test_vllm_unchanged_without_options(runs, tmp_path):
    # the same run with every plugin disabled: same tokens, same acceptance counters, vLLM's own draft class
    off = run_in_subprocess(RunSpec('no-plugin', CKPT, 3, {'VLLM_PLUGINS': ''}, PROMPTS, 32), log_dir=tmp_path, quiet=True)
    assert off['draft']['class'].startswith('vllm.model_executor.models.qwen3_5_mtp.')
    assert 'mtp_lit: ' not in Path(off['log']).read_text()
    assert off['tokens'] == runs['mtp-bf16']['tokens']
    assert off['acceptance'] == runs['mtp-bf16']['acceptance']
    assert off['draft']['param_dtypes'] == runs['mtp-bf16']['draft']['param_dtypes']

def test_vllm_native_switches(runs, tmp_path):
    "vLLM's own switches: speculative_config.quantization='fp8' turns the FP8 draft on, --hf-overrides mtp_lit sets the rest."
    sc = {'method': 'mtp', 'num_speculative_tokens': 3, 'quantization': 'fp8'}
    r = run_in_subprocess(RunSpec('native', CKPT, 3, {}, PROMPTS, 32, engine_args={
        'speculative_config': sc, 'hf_overrides': {'mtp_lit': {'fp8_scheme': 'per-channel', 'draft_window': 16}}}), log_dir=tmp_path, quiet=True)
    dt = r['draft']['param_dtypes']
    assert dt['model.layers.0.self_attn.qkv_proj.weight'] == 'float8_e4m3fn' and dt['model.fc.weight'] == 'float8_e4m3fn'
    assert set(r['draft']['attention_windows'].values()) == {16}
    assert r['tokens'] == runs['plain']['tokens']
    log = Path(r['log']).read_text()
    assert "FP8 draft stack (per-channel" in log and 'draft window 16 tokens' in log

def test_bad_option_value_names_the_option(tmp_path):
    with pytest.raises(RuntimeError) as e:
        run_in_subprocess(RunSpec('bad-option', CKPT, 3, {'MTP_FP8': '2'}, PROMPTS[:1], 4), log_dir=tmp_path, quiet=True)
    assert "MTP_FP8='2': expected 0 or 1" in Path(tmp_path / 'bad-option.log').read_text()

def test_fp8_on_checkpoint_without_mtp_layer(tmp_path):
    dst = tmp_path / 'no-mtp'
    shutil.copytree(CKPT, dst)
    with safe_open(str(dst / 'model.safetensors'), 'pt') as f:
        kept = {k: f.get_tensor(k) for k in f.keys() if not k.startswith('mtp.')}
    save_file(kept, str(dst / 'model.safetensors'), metadata={'format': 'pt'})
    with pytest.raises(RuntimeError):
        run_in_subprocess(RunSpec('no-mtp', str(dst), 3, {'MTP_FP8': '1'}, PROMPTS[:1], 4), log_dir=tmp_path, quiet=True)
    log = Path(tmp_path / 'no-mtp.log').read_text()
    assert "mtp_lit options (fp8 from env MTP_FP8) need the draft's MTP layer" in log
