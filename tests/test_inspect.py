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
