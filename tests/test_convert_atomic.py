"""A real `mtp-lit quantize` process killed in the middle of writing leaves no DST, and SRC is unchanged.

The source is a tiny Qwen3.5-MoE checkpoint with thousands of MTP expert tensors, so that streaming the MTP shard
takes seconds; the test waits until the shard being written appears in `DST.tmp-<pid>`, then signals the process:
- SIGKILL: no cleanup can run, so the temporary directory stays, but DST does not exist; the next run removes the
  dead process's `DST.tmp-<pid>` and writes a DST byte-identical to an uninterrupted run's;
- SIGTERM / SIGINT: the CLI turns them into an exception, removes its temporary directory and exits 143 / 130.
"""
import os, shutil, signal, subprocess, sys, time
from pathlib import Path

import pytest

from mtp_lit.convert import quantize, tiny_mtp_checkpoint
from conftest import default_sigint, mtp_lit_cli, tree_hashes as _hashes

N_EXPERTS = 2048        # 3 x 2048 expert tensors in the MTP shard


def _cli() -> list: return mtp_lit_cli('quantize', 'convert', 'quantize_cli')


@pytest.fixture(scope='module')
def src(tmp_path_factory):
    d = tmp_path_factory.mktemp('atomic') / 'src'
    tiny_mtp_checkpoint(d, 'qwen3_5_moe', hidden=64, n_experts=N_EXPERTS, shards=2)
    return d


def _start_and_signal(src: Path, dst: Path, sig) -> tuple[subprocess.Popen, Path]:
    "Start `mtp-lit quantize SRC DST`, wait until the MTP shard is being written in its temp dir, send `sig`."
    env = {**os.environ, 'OMP_NUM_THREADS': '1'}
    p = subprocess.Popen(_cli() + [str(src), str(dst), '--quiet'], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                         preexec_fn=default_sigint)
    tmp = dst.parent / f'{dst.name}.tmp-{p.pid}'
    shard = tmp / 'model-00002-of-00002.safetensors'
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None:
        if shard.exists() and shard.stat().st_size > 0: break
        time.sleep(0.005)
    assert p.poll() is None, f"conversion finished before it could be interrupted (rc={p.returncode}, {p.stderr.read().decode()[-500:]})"
    assert shard.exists(), "the MTP shard never appeared in the temporary directory"
    p.send_signal(sig)
    p.wait(timeout=60)
    return p, tmp


def test_sigkill_leaves_no_dst_and_rerun_cleans_up(src, tmp_path):
    before = _hashes(src)
    dst = tmp_path / 'out-mtpfp8'
    p, tmp = _start_and_signal(src, dst, signal.SIGKILL)
    assert p.returncode == -signal.SIGKILL
    assert not dst.exists()
    assert tmp.exists()                                 # nothing could clean up after SIGKILL ...
    assert _hashes(src) == before
    quantize(src, dst, progress=False)                  # ... the next run does
    assert not tmp.exists() and dst.exists()
    ref = quantize(src, tmp_path / 'ref-mtpfp8', progress=False)
    assert _hashes(dst) == _hashes(ref)
    assert _hashes(src) == before


@pytest.mark.parametrize('sig,rc', [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_sigterm_sigint_clean_up(src, tmp_path, sig, rc):
    before = _hashes(src)
    dst = tmp_path / 'out-mtpfp8'
    p, tmp = _start_and_signal(src, dst, sig)
    err = p.stderr.read().decode()
    assert p.returncode == rc, err
    assert 'nothing written' in err
    assert not dst.exists() and not tmp.exists()
    assert not list(tmp_path.glob('out-mtpfp8.*'))
    assert _hashes(src) == before


def test_cli_success_and_existing_dst(src, tmp_path):
    dst = tmp_path / 'ok-mtpfp8'
    r = subprocess.run(_cli() + [str(src), str(dst), '--quiet', '--scheme', 'block'], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(dst.absolute())
    r2 = subprocess.run(_cli() + [str(src), str(dst), '--quiet'], capture_output=True, text=True)
    assert r2.returncode == 1 and 'exists; pass overwrite=True' in r2.stderr
    shutil.rmtree(dst)
