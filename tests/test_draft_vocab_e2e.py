"""The vocab-truncated draft head in real vLLM: loaded with K rows, greedy output unchanged, MTP_DRAFT_VOCAB=0 turns it off."""
import pytest
from mtp_lit.demo import run_in_subprocess, RunSpec, demo_prompts
from mtp_lit.draft_vocab import build_draft_vocab
from mtp_lit.model import checkpoint_path
from mtp_lit.train import corpus_files

pytestmark = pytest.mark.vllm
CKPT = checkpoint_path('qwen3_5-tiny')

@pytest.fixture(scope='module')
def variant(tmp_path_factory):
    out = tmp_path_factory.mktemp('dv') / 'qwen3_5-tiny-dv1024'
    return build_draft_vocab(CKPT, corpus_files('train')[:60], 1024, out=out, progress=False)

def test_truncated_head_serves_and_is_lossless(variant, demo_runs, tmp_path):
    on = run_in_subprocess(RunSpec('dv-1024', str(variant), 3, {'MTP_FP8': '1'}, demo_prompts(4), 32), log_dir=tmp_path, quiet=True)
    assert on['draft']['head_rows'] == {'draft_lm_head': 1024}
    assert on['draft']['param_dtypes']['draft_lm_head.weight'] == 'float8_e4m3fn'   # FP8 head with MTP_FP8=1
    assert on['tokens'] == demo_runs['plain']['tokens']
    assert on['acceptance']['drafts'] > 0

def test_draft_vocab_off(variant, demo_runs, tmp_path):
    off = run_in_subprocess(RunSpec('dv-off', str(variant), 3, {'MTP_DRAFT_VOCAB': '0'}, demo_prompts(4), 32), log_dir=tmp_path, quiet=True)
    assert off['draft']['head_rows'] == {}
    assert off['tokens'] == demo_runs['plain']['tokens']
    assert off['acceptance'] == demo_runs['mtp-bf16']['acceptance']
