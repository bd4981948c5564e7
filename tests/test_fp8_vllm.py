"""`mtp_lit.fp8.quantize_fp8` / `quantize_act_per_token` against vLLM's own reference quantizers, byte for byte.

vLLM's online FP8 methods are what a BF16 draft would get from `--quantization fp8_*`; the converter and the
plugin's online path use `quantize_fp8`, so the bytes must be vLLM's:
- per-tensor: `online/fp8.py` `_fp8_scale` + the static quant kernel (multiply by the reciprocal), whose torch
  reference is `QuantFP8(static=True, PER_TENSOR).forward_native`;
- per-channel: `online/fp8.py` `_fp8_channel_scale` + `_fp8_quant_per_channel` (true division);
- block 128x128 (+ UE8M0): `vllm.utils.deep_gemm.per_block_cast_to_fp8`;
- activations: `QuantFP8(static=False, PER_TOKEN).forward_native`.
"""
import pytest
import torch

from mtp_lit.fp8 import quantize_fp8, quantize_act_per_token, dequantize_fp8

pytest.importorskip("vllm")
deep_gemm = pytest.importorskip("vllm.utils.deep_gemm")
online = pytest.importorskip("vllm.model_executor.layers.quantization.online.fp8")
qfp8 = pytest.importorskip("vllm.model_executor.layers.quantization.input_quant_fp8")
from vllm.model_executor.layers.quantization.utils.quant_utils import GroupShape  # noqa: E402

SHAPES = [(256, 384), (300, 200), (64, 1000), (1, 7)]


def _weights():
    torch.set_num_threads(1)
    for i, shape in enumerate(SHAPES):
        g = torch.Generator().manual_seed(i)
        w = torch.randn(*shape, generator=g) * torch.exp(torch.randn(shape[0], 1, generator=g))
        w[:, : max(1, shape[1] // 100)] *= 50          # outlier columns
        yield w.bfloat16()


@pytest.fixture(scope="module")
def vllm_config():
    "QuantFP8 is a CustomOp: it needs a current VllmConfig (as vLLM's own tests set with `default_vllm_config`)."
    from vllm.config import VllmConfig, set_current_vllm_config
    with set_current_vllm_config(VllmConfig()):
        yield


def _bytes(q):
    return q.view(torch.uint8)


@pytest.mark.parametrize("w", list(_weights()), ids=[f"{a}x{b}" for a, b in SHAPES])
def test_per_tensor_matches_vllm(w, vllm_config):
    scale = online._fp8_scale(w.float().abs().max().reshape(1))
    ref, _ = qfp8.QuantFP8(static=True, group_shape=GroupShape.PER_TENSOR).forward_native(w, scale)
    q, s = quantize_fp8(w, "per-tensor")
    assert torch.equal(s, scale)
    assert torch.equal(_bytes(q), _bytes(ref))


@pytest.mark.parametrize("w", list(_weights()), ids=[f"{a}x{b}" for a, b in SHAPES])
def test_per_channel_matches_vllm(w):
    scale = online._fp8_channel_scale(w.float().abs().amax(dim=-1, keepdim=True))
    ref = online._fp8_quant_per_channel(w, scale)
    q, s = quantize_fp8(w, "per-channel")
    assert torch.equal(s, scale)
    assert torch.equal(_bytes(q), _bytes(ref))


@pytest.mark.parametrize("ue8m0", [False, True])
@pytest.mark.parametrize("w", list(_weights()), ids=[f"{a}x{b}" for a, b in SHAPES])
def test_block_matches_vllm(w, ue8m0):
    ref, ref_s = deep_gemm.per_block_cast_to_fp8(w, [128, 128], use_ue8m0=ue8m0)
    q, s = quantize_fp8(w, "block", (128, 128), "ue8m0" if ue8m0 else "float32")
    assert torch.equal(s, ref_s.float())
    assert torch.equal(_bytes(q), _bytes(ref))
    assert torch.equal(dequantize_fp8(q, s, (128, 128)), dequantize_fp8(ref, ref_s, (128, 128)))


def test_per_token_activations_match_vllm(vllm_config):
    torch.set_num_threads(1)
    x = torch.randn(33, 512, generator=torch.Generator().manual_seed(7)).bfloat16() * 3
    x[5] = 0
    ref, ref_s = qfp8.QuantFP8(static=False, group_shape=GroupShape.PER_TOKEN).forward_native(x)
    q, s = quantize_act_per_token(x)
    assert torch.equal(s, ref_s)
    assert torch.equal(_bytes(q), _bytes(ref))
