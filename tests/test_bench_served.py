"""The in-vLLM benchmark (`tests/gpu/bench_served.py`) on vLLM CPU: random weights (`--load-format dummy`) with the FP8
draft, a truncated draft head and a draft window at once; the worker times the draft's proposals."""
import json, shutil, sys
from pathlib import Path
import pytest
from mtp_lit.model import checkpoint_path

pytestmark = pytest.mark.vllm
sys.path.insert(0, str(Path(__file__).parent / 'gpu'))

def test_dummy_weights_with_every_draft_option(tmp_path):
    import bench_served as bs
    cfgs = tmp_path / 'configs'; (cfgs / 'tiny').mkdir(parents=True)
    shutil.copy(checkpoint_path('qwen3_5-tiny') / 'config.json', cfgs / 'tiny')
    out = tmp_path / 'bench.json'
    bs.main(['--out', str(out), '--work', str(tmp_path / 'work'), '--config-dir', str(cfgs), '--models', 'tiny',
             '--drafts', 'fp8-head-window', '--batches', '1', '2', '--prompt', '32', '--tokens', '8', '--head-rows', '1024', '--profile', '2'])
    r = json.loads(out.read_text())['runs']['tiny/bf16-target/fp8-head-window/k3']
    assert 'error' not in r, r.get('error')
    assert r['draft']['head_rows'] == {'draft_lm_head': 1024} and r['draft']['windows'] == [2048]
    assert r['draft']['e4m3_params'] == 6   # fc, qkv, o, gate_up, down and the 1024-row head
    assert r['settings']['speculative_config'] == {'use_local_argmax_reduction': True}   # the head's token straight from get_top_tokens
    sb = r['start_breakdown']   # vLLM's own start-up log lines
    assert len(sb['init_model_s']) == 2 and len(sb['init_engine_s']) == 1 and 0 < sb['init_engine_s'][0] < r['start_s']   # target and draft
    for b in ('1', '2'):
        row = r['batches'][b]
        assert 1 <= row['tokens_per_step'] < 1.5   # random weights: (almost) no draft token accepted
        assert row['draft_ms'] > 0 and row['step_ms'] > 0   # figures, not compared: on a busy CPU the median draft call can outlast the fastest step
        assert row['target_ms'] > 0 and row['target_tokens'] == 4 * int(b)   # the verify's forwards (eager: B (k+1) tokens, unpadded)
        for key, med in (('target_spread', row['target_ms']), ('draft_spread', row['draft_ms'])):   # [p10, p90, count] around the median
            lo, hi, n = row[key]
            assert lo <= med <= hi and n >= 2   # the draft: one call per timed step (fewer where a token was accepted)
        lo, hi, n = row['worker_step_spread']   # the step timed one at a time in the worker: steps of all B sequences
        assert lo <= row['worker_step_ms'] <= hi and n >= 8
        assert row['worker_step_ms'] > row['target_ms']   # a whole step holds its verify (medians of one clock)
    assert r['graph_sizes'] == []   # eager on vLLM CPU: no CUDA graphs to pad to
    # the windowed draft's layer joins the 3 target attention layers' group; the window is in the proposer's metadata builder
    assert r['kv_cache_groups'] == [['FullAttentionSpec', 4]] and r['metadata_windows'] == [2048]
    assert r['runner_metadata_windows'] == [2048]   # the model runner's builder for the draft's layer: a backend class of its own
    prof = r['batches']['2']['profile']   # the profiler in the worker: CPU ops here (no CUDA kernels on vLLM CPU)
    assert prof['wall_ms'] > 0 and prof['gpu_ms'] == 0 and prof['tokens'] == 16

def test_one_prompt_per_record(tmp_path):
    import bench_served as bs
    out = tmp_path / 'bench.json'   # run names do not say the prompt, so a record keeps one
    out.write_text(json.dumps({'runs': {'tiny/bf16-target/bf16/k3': {'settings': {'prompt': 512}}}}))
    with pytest.raises(SystemExit, match=r'holds runs at --prompt 512; write the --prompt 8192 runs to another --out'):
        bs.main(['--out', str(out), '--prompt', '8192'])

def test_one_machine_per_record(tmp_path):
    import bench_served as bs
    out = tmp_path / 'bench.json'   # the H200's record: runs of this CPU would sit beside runs they do not compare with
    out.write_text(json.dumps({'environment': {'device': 'NVIDIA H200', 'vllm': '0.26.0', 'torch': '2.11.0+cu130'}, 'runs': {}}))
    with pytest.raises(SystemExit, match=r'holds runs on NVIDIA H200 \(vLLM 0\.26\.0, torch 2\.11\.0\+cu130\); this machine is cpu'):
        bs.main(['--out', str(out)])

def test_record_run_keeps_the_replaced_engine():
    import bench_served as bs
    timed = lambda ms: {'batches': {'1': {'draft_ms': ms}}}
    rec = {'runs': {'m/bf16-target/fp8/k3': timed(1.0) | {'superseded': {'batches': ['1']}}}}
    bs.record_run(rec, 'm/bf16-target/fp8/k3', {'error': 'CUDA out of memory'})   # a failed engine keeps the timed one
    assert rec['runs']['m/bf16-target/fp8/k3']['batches']['1']['draft_ms'] == 1.0 and 'earlier' not in rec
    bs.record_run(rec, 'm/bf16-target/fp8/k3', timed(0.5))   # a re-served engine: the old one under 'earlier', its note with it
    assert rec['runs']['m/bf16-target/fp8/k3'] == timed(0.5)
    assert rec['earlier']['m/bf16-target/fp8/k3'] == timed(1.0) | {'superseded': {'batches': ['1']}}
    bs.record_run(rec, 'm/bf16-target/bf16/k3', {'error': 'x'})   # a new name: recorded, error or not
    assert rec['runs']['m/bf16-target/bf16/k3'] == {'error': 'x'}

def test_spread():
    import bench_served as bs
    assert bs.spread([1.0]) is None
    lo, hi, n = bs.spread([float(x) for x in range(1, 12)])   # 1 ... 11
    assert (round(lo, 6), round(hi, 6), n) == (2.0, 10.0, 11)

def test_padded():
    import bench_served as bs   # the H200 on 2026-12-04, k = 2: vLLM rounded the CUDA-graph sizes to multiples of 3
    sizes = [3, 6, 9, 18, 24, 33, 48, 66, 96, 129, 192]
    assert [bs.padded(n, sizes) for n in (3, 12, 16, 64, 192, 200)] == [3, 18, 18, 66, 192, 200]
    assert bs.padded(12, []) == 12   # eager: no padding

def test_run_list():
    import argparse, bench_served as bs
    a = argparse.Namespace(runs=['Qwen3.5-27B/fp8-target/fp8-head/k3', 'Qwen3.5-35B-A3B/bf16-target/plain/k0'])
    assert bs.run_list(a) == [('Qwen3.5-27B', 'fp8', 'fp8-head', 3), ('Qwen3.5-35B-A3B', 'bf16', 'plain', 0)]
    with pytest.raises(SystemExit, match=r'--runs Qwen3.5-27B/fp8/fp8-head/k3: expected MODEL/\(bf16\|fp8\)-target/'):
        bs.run_list(argparse.Namespace(runs=['Qwen3.5-27B/fp8/fp8-head/k3']))
    a = argparse.Namespace(runs=[], models=['m'], targets=['bf16'], drafts=['bf16', 'fp8'], ks=[1, 3], plain=True)
    assert bs.run_list(a) == [('m', 'bf16', 'bf16', 1), ('m', 'bf16', 'bf16', 3), ('m', 'bf16', 'fp8', 1), ('m', 'bf16', 'fp8', 3), ('m', 'bf16', 'plain', 0)]
