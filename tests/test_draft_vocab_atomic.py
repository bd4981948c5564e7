"""A real `mtp-lit draft-vocab` process killed at each stage of writing leaves its destination as it was or complete,
never half-written; the next run removes the dead process's leftovers and writes byte-identical files; the source of a
variant is never modified.

The checkpoint carries a few thousand small extra files, so that hard-linking the tree, flushing it and deleting the
old tree each take a moment the test can hit: it polls the file system and sends SIGKILL (no cleanup can run) when
1. the temporary tree `.NAME.tmp-PID` has appeared (hard links being made),
2. the new `draft_vocab.safetensors` is in it (the new files being flushed, just before the atomic rename / exchange;
   the kill may land just after it, and the destination must then be complete),
3. in place only: the new tree is already at CKPT and the old one, now at `.NAME.tmp-PID`, is being deleted.
SIGTERM / SIGINT make the CLI remove its temporary tree and exit 143 / 130.
"""
import os, shutil, signal, subprocess, sys, time
from pathlib import Path

import pytest

from mtp_lit.draft_vocab import DRAFT_VOCAB_FILE, build_draft_vocab, load_draft_vocab
from mtp_lit.model import build_random_checkpoint, byte_tokenizer, qwen3_5_config
from conftest import default_sigint, mtp_lit_cli, tree_hashes as _hashes

SMALL = dict(vocab_size=320, hidden_size=64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
             head_dim=32, intermediate_size=64)
N_EXTRA = 2000
K = 64


def _cli() -> list: return mtp_lit_cli('draft-vocab', 'draft_vocab', 'draft_vocab_cli')


@pytest.fixture(scope='module')
def base(tmp_path_factory):
    "(checkpoint, corpus, reference digests after an uninterrupted in-place run)."
    root = tmp_path_factory.mktemp('dv-atomic')
    ck = build_random_checkpoint(root / 'ck', qwen3_5_config(**SMALL), tokenizer=byte_tokenizer())
    extra = ck / 'extra'; extra.mkdir()
    for i in range(N_EXTRA): (extra / f'{i:05d}.txt').write_text(f'{i}\n')
    corpus = root / 'corpus'; corpus.mkdir()
    for i in range(8): (corpus / f'{i}.py').write_text(f'def f{i}(x):\n    return x * {i} + 1\n' * (i + 1))
    for f in ck.rglob('*'): _fsync(f)       # clean pages: the runs' own fsyncs then cost what they cost on a real checkpoint
    ref = _copy(ck, root / 'ref')
    build_draft_vocab(ref, corpus, K, progress=False)
    return ck, corpus, _hashes(ref)


def _fsync(p: Path):
    fd = os.open(p, os.O_RDONLY)
    try: os.fsync(fd)
    finally: os.close(fd)


def _copy(src: Path, dst: Path) -> Path:
    "A hard-linked copy: the builder never opens a source file for writing (the tests check that, too)."
    shutil.copytree(src, dst, copy_function=os.link)
    return dst


def _leftovers(d: Path) -> list:
    return sorted(p.name for p in d.parent.iterdir() if p.name.startswith(f'.{d.name}.'))


def _run_and_signal(args: list, dst: Path, stage: str, sig=signal.SIGKILL, timeout: float = 120):
    "Start `mtp-lit draft-vocab ARGS`, wait for `stage` of writing `dst`, send `sig`; returns (process, temp dir)."
    p = subprocess.Popen(_cli() + args + ['--no-progress'], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env={**os.environ, 'OMP_NUM_THREADS': '1'}, preexec_fn=default_sigint)
    tmp = dst.with_name(f'.{dst.name}.tmp-{p.pid}')
    ready = {'tmp': lambda: tmp.exists(),
             'written': lambda: (tmp / DRAFT_VOCAB_FILE).exists(),
             'swapped': lambda: tmp.exists() and (dst / DRAFT_VOCAB_FILE).exists()}[stage]
    deadline = time.time() + timeout
    while time.time() < deadline and p.poll() is None and not ready(): time.sleep(0.0005)
    assert p.poll() is None, f"finished before stage {stage!r} (rc={p.returncode}, {p.stderr.read().decode()[-500:]})"
    p.send_signal(sig)
    p.wait(timeout=60)
    return p, tmp


@pytest.mark.parametrize('stage', ['tmp', 'written', 'swapped'])
def test_in_place_sigkill(base, tmp_path, stage):
    src, corpus, ref = base
    ck = _copy(src, tmp_path / 'ck')
    before = _hashes(ck)
    p, tmp = _run_and_signal([str(ck), '--corpus', str(corpus), '--size', str(K)], ck, stage)
    assert p.returncode == -signal.SIGKILL
    after = _hashes(ck)
    assert after in (before, ref)                                       # old or new, complete: never a mixture
    if stage == 'swapped': assert after == ref
    if stage == 'tmp': assert after == before
    assert tmp.exists() or after == ref                                 # nothing could clean up after SIGKILL ...
    build_draft_vocab(ck, corpus, K, progress=False)                    # ... the next run does
    assert _leftovers(ck) == []
    assert _hashes(ck) == ref                                           # byte-identical to an uninterrupted run
    assert load_draft_vocab(ck).ids.numel() == K


@pytest.mark.parametrize('stage', ['tmp', 'written'])
def test_variant_sigkill(base, tmp_path, stage):
    src, corpus, ref = base
    ck = _copy(src, tmp_path / 'ck')
    before = _hashes(ck)
    out = tmp_path / 'ck-dv'
    p, tmp = _run_and_signal([str(ck), '--corpus', str(corpus), '--size', str(K), '--out', str(out)], out, stage)
    assert p.returncode == -signal.SIGKILL
    assert (not out.exists() and tmp.exists()) or (stage == 'written' and _hashes(out) == ref)   # absent, or complete
    assert _hashes(ck) == before
    if out.exists(): shutil.rmtree(out)      # (killed just after its rename: complete; rerun from scratch below)
    r = subprocess.run(_cli() + [str(ck), '--corpus', str(corpus), '--size', str(K), '--out', str(out), '--no-progress'],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert _leftovers(out) == [] and _hashes(out) == ref and _hashes(ck) == before


@pytest.mark.parametrize('sig,rc', [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_sigterm_sigint_clean_up(base, tmp_path, sig, rc):
    src, corpus, ref = base
    ck = _copy(src, tmp_path / 'ck')
    before = _hashes(ck)
    p, tmp = _run_and_signal([str(ck), '--corpus', str(corpus), '--size', str(K)], ck, 'tmp', sig)
    err = p.stderr.read().decode()
    assert p.returncode == rc, err
    assert 'nothing written' in err
    assert _leftovers(ck) == [] and _hashes(ck) == before


def test_rerun_is_byte_identical_and_idempotent(base, tmp_path):
    src, corpus, ref = base
    ck = _copy(src, tmp_path / 'ck')
    for _ in range(2):
        build_draft_vocab(ck, corpus, K, progress=False)
        assert _hashes(ck) == ref and _leftovers(ck) == []
