"""mtp_lit served by real vLLM on a GPU with vLLM's defaults (torch.compile, CUDA graphs): `serve_matrix.py`'s matrix.

Skipped without CUDA and vLLM. On a GPU machine with vLLM installed:

    MTP_LIT_GPU_RESULTS=nbs/results/serve_gpu.json python -m pytest tests/gpu -ra

(`MTP_LIT_GPU_PARALLEL` engines at once, default 6, each with `MTP_LIT_GPU_MEMORY` of the GPU's memory, default 0.12, and
with more than one a fixed KV cache of `MTP_LIT_KV_CACHE_BYTES`, default 2 GiB, since vLLM's start-up memory profiling
fails while another engine allocates or frees;
`MTP_LIT_GPU_REUSE=1` asserts on an existing results file instead of running the matrix.)
Asserts: every run starts; greedy tokens identical to plain decoding of the same checkpoint (a first difference at a
near-tie of plain's logits is reported, not failed); acceptance length within 5 % of what the checkpoint's weights give
on the same texts (mtp_lit's plain-torch reference drafting this device's plain outputs; for a draft window, the ratio
to its twin without the window as on vLLM CPU, `nbs/results/serve_cpu.json`); the FP8 runs' draft linears are e4m3 in the worker, online FP8 bit-identical to the
converter's checkpoint; the truncated head has its K rows; the window is on the draft's attention; each family's
permutation checkpoint accepts > 95 % of its drafts."""
import json, os, sys
from pathlib import Path
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
torch = pytest.importorskip('torch')
pytest.importorskip('vllm')
pytestmark = [pytest.mark.vllm, pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU (and vLLM): the GPU serving suite')]
CPU = HERE.parent.parent / 'nbs' / 'results' / 'serve_cpu.json'

@pytest.fixture(scope='session')
def record(tmp_path_factory):
    import serve_matrix as sm
    out = Path(os.environ.get('MTP_LIT_GPU_RESULTS', tmp_path_factory.mktemp('serve') / 'serve_gpu.json'))
    if os.environ.get('MTP_LIT_GPU_REUSE') == '1' and out.exists(): return json.loads(out.read_text())
    os.environ.setdefault('MTP_LIT_GPU_MEMORY', '0.12')
    parallel = os.environ.get('MTP_LIT_GPU_PARALLEL', '6')
    if parallel != '1':   # engines starting together break each other's memory profiling: a fixed KV cache skips it
        os.environ.setdefault('MTP_LIT_KV_CACHE_BYTES', str(2 << 30))
    sm.main(['--out', str(out), '--work', str(tmp_path_factory.mktemp('work')), '--parallel', parallel])
    return json.loads(out.read_text())

@pytest.fixture(scope='session')
def matrix(record): return record['runs']

def mtp_runs(m): return {n: r for n, r in m.items() if r.get('k')}

def test_every_run_serves(matrix):
    import serve_matrix as sm
    assert {n: r['error'][-300:] for n, r in matrix.items() if 'error' in r and n not in sm.EXPECTED_ERRORS} == {}
    for n, msg in sm.EXPECTED_ERRORS.items(): assert msg in matrix[n].get('error', ''), n   # refused at load, naming the layer

def test_greedy_tokens_identical_to_plain(matrix):
    assert {n: r['differences'] for n, r in mtp_runs(matrix).items() if r.get('wrong_tokens')} == {}

def test_acceptance_as_the_weights_give(record):
    "τ within 5 % of what the checkpoint's weights give on the same texts (`serve_matrix.held_to`)."
    import serve_matrix as sm
    far = {n: (round(g, 3), round(w, 3)) for n, (g, w) in sm.held_to(record, json.loads(CPU.read_text())['runs']).items()
           if abs(g - w) > 0.05 * w}
    assert far == {}

def test_fp8_drafts_are_e4m3_in_the_worker(matrix):
    for n, r in mtp_runs(matrix).items():
        if 'draft' not in r: continue
        fp8 = 'fp8' in n or '/conv-' in n
        assert bool(r['draft']['e4m3_params']) == fp8, n
        assert r['draft']['device'].startswith('cuda'), n

def test_online_fp8_equals_the_converter(matrix):
    "Online FP8 writes the converter's e4m3 bytes: both embedded checkpoints' schemes, and every family served with the matrix."
    for ck in ('qwen3_5-tiny', 'qwen3_5_moe-tiny'):
        for on, conv in (('fp8-tensor', 'conv-tensor'), ('fp8-channel', 'conv-channel')):
            assert matrix[f'{ck}/{on}']['draft']['digests'] == matrix[f'{ck}/{conv}']['draft']['digests'], (ck, on)
    for f in {n.split('/')[0] for n in matrix if '-tiny/' not in n}:
        on, conv = matrix[f'{f}/fp8-channel'], matrix[f'{f}/conv-channel']
        if 'served_at' in on or 'served_at' in conv: continue   # a run kept from an earlier record, with its own `served_at`
        assert on['draft']['digests'] == conv['draft']['digests'], f

def test_vllm_native_fp8_switch(matrix):
    "speculative_config.quantization='fp8' with the scheme from --hf-overrides serves the same draft as MTP_FP8=1."
    for ck in ('qwen3_5-tiny', 'qwen3_5_moe-tiny'):
        nat, env = matrix[f'{ck}/native-fp8'], matrix[f'{ck}/fp8-channel']
        assert nat['draft']['digests'] == env['draft']['digests'] and nat['draft']['e4m3_params'] == env['draft']['e4m3_params'], ck
        assert nat['acceptance'] == env['acceptance'], ck

def test_truncated_head_and_window(matrix):
    for ck in ('qwen3_5-tiny', 'qwen3_5_moe-tiny'):
        head = matrix[f'{ck}/fp8-head']['draft']
        assert head['head_rows'] == {'draft_lm_head': 1024} and 'draft_lm_head.weight' in head['e4m3_params']
        assert matrix[f'{ck}/window']['draft']['windows'] == [16]

def test_family_permutation_checkpoints(matrix):
    import tiny_families as tf
    for fam in tf.FAMILIES:
        assert matrix[f'{fam}/plain']['permutation_chain'], fam
        for run in ('bf16', 'fp8-channel', 'conv-channel'):
            assert matrix[f'{fam}/{run}']['acceptance']['acceptance_rate'] > 0.95, (fam, run)
