"""`mtp_lit.window.window_mask` against vLLM's own CPU paged-attention kernel (`ops.cpu_attention_with_kv_cache`).

The kernel ships compiled, so its sliding-window convention can only be read off its output: a random cache is
attended with `sliding_window=W` and compared with a float32 reference masked by `window_mask(..., window=W)`.
It must match to BF16 rounding, and clearly differ from the off-by-one reading (a window of W+1).
"""
import math
import pytest
import torch

from mtp_lit.window import window_mask

ops = pytest.importorskip("vllm._custom_ops")


def _attend(n, window, q_len, dtype=torch.bfloat16, block=32, nh=2, nkv=1, hd=64):
    "Run vLLM's CPU kernel for one request of `n` cached tokens whose last `q_len` are queries; return (kernel, q, k, v)."
    from vllm.v1.attention.backends.cpu_attn import _get_attn_isa
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(n * 1000 + window)
    isa = _get_attn_isa(dtype, block, hd)
    k, v = (torch.randn(n, nkv, hd, generator=g).to(dtype) for _ in range(2))
    q = torch.randn(q_len, nh, hd, generator=g).to(dtype)
    nblocks = -(-n // block)
    cache = torch.zeros(nblocks, nkv, block, 2 * hd, dtype=dtype).view(nblocks, nkv, 2 * block, hd)
    key_cache, value_cache = cache.chunk(2, dim=2)
    ops.cpu_attn_reshape_and_cache(k, v, key_cache, value_cache, torch.arange(n, dtype=torch.int64), isa)
    qsl, seq = torch.tensor([0, q_len], dtype=torch.int32), torch.tensor([n], dtype=torch.int32)
    sm = ops.cpu_attn_get_scheduler_metadata(num_reqs=1, num_heads=nh, num_kv_heads=nkv, head_dim=hd, seq_lens=seq,
                                             dtype=dtype, query_start_loc=qsl, causal=True, sliding_window_size=window,
                                             isa=isa, enable_kv_split=False)
    out = torch.zeros(q_len, nh, hd, dtype=dtype)
    ops.cpu_attention_with_kv_cache(query=q, key_cache=key_cache, value_cache=value_cache, output=out,
                                    query_start_loc=qsl, seq_lens=seq, scale=1 / math.sqrt(hd), causal=True,
                                    alibi_slopes=None, sliding_window=window,
                                    block_table=torch.arange(nblocks, dtype=torch.int32)[None], softcap=0,
                                    scheduler_metadata=sm, s_aux=None)
    return out.float(), q.float(), k.float().expand(n, nh, hd), v.float().expand(n, nh, hd)


def _reference(q, k, v, mask):
    s = torch.einsum('qhd,khd->hqk', q, k) / math.sqrt(q.shape[-1])
    return torch.einsum('hqk,khd->qhd', s.masked_fill(~mask[None], float('-inf')).softmax(-1), v)


@pytest.mark.parametrize("n,window,q_len", [(100, 16, 1), (100, 16, 4), (77, 33, 77), (200, 64, 3), (100, 0, 1)])
def test_window_mask_matches_vllm_cpu_kernel(n, window, q_len):
    out, q, k, v = _attend(n, window, q_len)
    pos = torch.arange(n - q_len, n)
    err = (out - _reference(q, k, v, window_mask(pos, n, window=window))).abs().max().item()
    assert err < 0.02, f"window_mask differs from vLLM's CPU kernel by {err}"
    if window:  # the off-by-one reading (window excludes the current token) must be visibly wrong
        alt = (out - _reference(q, k, v, window_mask(pos, n, window=window + 1))).abs().max().item()
        assert alt > max(0.01, 4 * err), f"window W+1 fits vLLM's kernel too well ({alt}): the test cannot tell them apart"


def test_skipped_tokens_match_vllm_sliding_window_manager():
    "vLLM frees/skips `n - W + 1` tokens before the next token (position n): exactly those `window_mask` leaves out."
    from types import SimpleNamespace
    from vllm.v1.core.single_type_kv_cache_manager import SlidingWindowManager
    for W in (1, 4, 128):
        mgr = SimpleNamespace(sliding_window=W, extra_retained_tokens=0)
        for n in (0, 3, W, 1000):
            assert SlidingWindowManager.get_num_skipped_tokens(mgr, n) == int((~window_mask(n, n + 1, window=W)).sum())
