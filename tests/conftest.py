import hashlib, os, signal, sys
from pathlib import Path
import pytest

# vLLM on a small CPU machine (see ../shared/notes/vllm-cpu.md). Each test engine runs in one process
# (VLLM_ENABLE_V1_MULTIPROCESSING=0: engine core and worker in the process that calls LLM, vLLM's 'uni' executor): the draft
# code is the same, and an engine start costs one import of vLLM instead of three (~40 s instead of ~80 s here).
for k, v in {'VLLM_CPU_KVCACHE_SPACE': '1', 'HF_HUB_OFFLINE': '1', 'TRANSFORMERS_OFFLINE': '1', 'VLLM_NO_USAGE_STATS': '1',
             'VLLM_ENABLE_V1_MULTIPROCESSING': '0'}.items():
    os.environ.setdefault(k, v)

def default_sigint():
    "For subprocess.Popen(preexec_fn=...): SIGINT back to its default in the child, as for a foreground command (a CI"
    " runner started in the background with `&` passes SIGINT on ignored, and an ignored SIGINT stays ignored)."
    signal.signal(signal.SIGINT, signal.SIG_DFL)

def tree_hashes(d: Path) -> dict:
    "sha256 of every file under directory `d`, by relative path."
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.rglob('*')) if p.is_file()}

def mtp_lit_cli(verb: str, module: str, fn: str) -> list:
    "The argv prefix of `mtp-lit VERB`: the installed console script, else `python -c` calling `mtp_lit.MODULE.FN(argv)`."
    exe = Path(sys.executable).with_name('mtp-lit')
    if exe.exists(): return [str(exe), verb]
    return [sys.executable, '-c', f'import sys; from mtp_lit.{module} import {fn}; sys.exit({fn}(sys.argv[1:]))']

def pytest_configure(config):
    config.addinivalue_line('markers', 'vllm: starts a real vLLM engine (slow)')
    config.addinivalue_line('markers', 'gpu: needs CUDA')

@pytest.fixture(scope='session')
def demo_runs(tmp_path_factory):
    "plain / MTP BF16 draft / MTP FP8 draft on the embedded checkpoint, 4 demo prompts, 32 tokens: {name: result}."
    from mtp_lit.demo import demo
    from mtp_lit.model import checkpoint_path
    res = demo(str(checkpoint_path('qwen3_5-tiny')), k=3, max_tokens=32, n_prompts=4, out=None, quiet=True,
               log_dir=tmp_path_factory.mktemp('demo-logs'))
    return {r['name']: r for r in res['runs']}
