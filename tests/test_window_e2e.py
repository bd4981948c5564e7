"""The draft window in real vLLM: only the draft's attention is windowed (the target keeps full attention), and greedy
output on prompts longer than the window equals plain decoding."""
import pytest
from mtp_lit.demo import run_in_subprocess, RunSpec, long_prompts
from mtp_lit.model import checkpoint_path

pytestmark = pytest.mark.vllm
CKPT = str(checkpoint_path('qwen3_5-tiny'))

def test_window_draft_only_and_lossless(tmp_path):
    prompts = long_prompts(CKPT, 384, 3)
    plain = run_in_subprocess(RunSpec('plain-long', CKPT, 0, {}, prompts, 32, max_model_len=512), log_dir=tmp_path, quiet=True)
    win = run_in_subprocess(RunSpec('window-64', CKPT, 3, {'MTP_DRAFT_WINDOW': '64'}, prompts, 32, max_model_len=512),
                            log_dir=tmp_path, quiet=True)
    assert set(win['draft']['attention_windows'].values()) == {64}
    assert set(win['target_windows'].values()) == {None}
    assert win['tokens'] == plain['tokens']
