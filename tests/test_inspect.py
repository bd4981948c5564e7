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
          f"{r['read']['seconds'] * 1e3:.0f} ms inside, {wall:.2f} s wall (process start included)")
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
