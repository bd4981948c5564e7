"""FP8 routed experts on the generic path: vLLM's `HYV3MTP` (Hunyuan V3, no row in the family table; its MTP layer is MoE)
built by vLLM's own draft loader with `MTP_FP8=1`, without an engine: a case of `tests/test_bad_inputs.py`'s one loader
process (`bad_inputs.load_drafts`), which calls `probe_experts` on it.

The checkpoint is a tiny config.json (4 experts of 32 rows, hidden size 64) read with vLLM's `--load-format dummy`: vLLM fills
every parameter with uniform values in [-1e-3, 1e-3] from a generator seeded 1234 per tensor, so the BF16 experts the FP8
method quantized are known exactly (`initialize_single_dummy_weight` on a tensor of the same shape) and serve as the reference.

Not served end to end: the suite's one engine start for the generic path serves ERNIE-4.5, whose MTP block is vLLM's dense
Llama layer, so no existing engine start has generic MoE experts, and CI has no time for another engine start.
"""
import json
from pathlib import Path

E, H, I, T, TOPK = 4, 64, 32, 16, 2
CONFIG = dict(architectures=['HYV3ForCausalLM'], model_type='hy_v3', vocab_size=4096, hidden_size=H, intermediate_size=128,
              num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1, head_dim=32, hidden_act='silu',
              max_position_embeddings=512, rms_norm_eps=1e-6, tie_word_embeddings=False, num_experts=E, num_experts_per_tok=TOPK,
              num_shared_experts=1, moe_intermediate_size=I, expert_hidden_dim=I, route_norm=True, first_k_dense_replace=0,
              mlp_layer_types=['sparse', 'sparse'], num_nextn_predict_layers=1, bos_token_id=0, eos_token_id=0,
              torch_dtype='bfloat16', rope_parameters={'rope_type': 'default', 'rope_theta': 10000.0})


def tiny_hy_v3(dst) -> Path:
    "A tiny Hunyuan V3 model directory at `dst`: `CONFIG` and the embedded checkpoint's tokenizer files, no weights."
    import shutil
    from mtp_lit.model import checkpoint_path
    dst = Path(dst); dst.mkdir(parents=True)
    (dst / 'config.json').write_text(json.dumps(CONFIG))
    for f in ('tokenizer.json', 'tokenizer_config.json', 'generation_config.json'): shutil.copy(checkpoint_path('qwen3_5-tiny') / f, dst / f)
    return dst


def _reference_act(layer):
    "The experts' gated activation `[.., 2I] -> [.., I]` as vLLM's own torch code computes it for `layer` (SiLU, clamped where the layer sets `swiglu_limit`, GELU, or SwiGLU-OAI)."
    import torch
    from types import SimpleNamespace
    from vllm.model_executor.layers.activation import SiluAndMulWithClamp, SwigluOAIAndMul
    act, limit = layer.activation.value, getattr(layer, 'swiglu_limit', None)
    elementwise = {'silu': torch.nn.functional.silu, 'gelu': torch.nn.functional.gelu,
                   'gelu_tanh': lambda g: torch.nn.functional.gelu(g, approximate='tanh')}
    if act == 'silu' and limit is not None:   # vLLM's silu_and_mul_with_clamp
        return lambda v: SiluAndMulWithClamp.forward_native(SimpleNamespace(swiglu_limit=limit, alpha=1.0, beta=0.0), v)
    if act in elementwise: return lambda v: elementwise[act](v.chunk(2)[0]) * v.chunk(2)[1]
    if act == 'swigluoai':   # interleaved gate/up rows, the kernel's fixed constants
        return lambda v: SwigluOAIAndMul.forward_native(SimpleNamespace(alpha=1.702, limit=7.0), v[None])[0]
    assert act == 'swigluoai_uninterleave', act
    a, b = layer.swiglu_alpha, layer.swiglu_beta
    p = SimpleNamespace(swiglu_limit=limit, alpha=1.0 if a is None else a, beta=0.0 if b is None else b)
    return lambda v: SiluAndMulWithClamp.forward_native(p, v)


def probe_experts(m) -> dict | None:
    "For a draft `m` loaded with `--load-format dummy`: its first FP8 routed experts on random tokens against BF16 experts of the same weights (None: no FP8 experts)."
    import torch
    from vllm.model_executor.model_loader.weight_utils import initialize_single_dummy_weight
    moe = [(n, x) for n, x in m.named_modules() if type(getattr(x, 'quant_method', None)).__name__ == 'Fp8DraftMoEMethod']
    if not moe: return None
    name, layer = moe[0]
    dev = layer.w13_weight.device
    n_exp, _, hidden = layer.w13_weight.shape   # the layer's own sizes (a class may size its experts apart from hidden_size)
    ref = {}
    for p in ('w13_weight', 'w2_weight'):   # the BF16 tensors vLLM's dummy loader wrote (on their device) before the FP8 method quantized them
        ref[p] = torch.empty(getattr(layer, p).shape, dtype=torch.bfloat16, device=dev); initialize_single_dummy_weight(ref[p])
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(T, hidden, generator=g) * 0.5).bfloat16()
    ids = torch.stack([torch.randperm(n_exp, generator=g)[:TOPK] for _ in range(T)]).to(torch.int32)
    tw = torch.softmax(torch.randn(T, TOPK, generator=g), -1)
    y = layer.quant_method.apply(layer, x.to(dev), tw.to(dev), ids.to(dev), None, None).float().cpu()
    w13, w2, xf = ref['w13_weight'].float().cpu(), ref['w2_weight'].float().cpu(), x.float()
    act = _reference_act(layer)
    y_ref = torch.zeros(T, hidden)
    for t in range(T):
        for j in range(TOPK):
            y_ref[t] += tw[t, j] * (w2[ids[t, j]] @ act(w13[ids[t, j]] @ xf[t]))
    rel = lambda a, b: float((a - b).norm() / b.norm())
    dq13 = (layer.w13_weight.float() * layer.w13_weight_scale[..., None]).cpu()
    return {'experts': name, 'n_fp8_moe_layers': len(moe), 'activation': layer.activation.value,
            'dtypes': {n: str(p.dtype).removeprefix('torch.') for n, p in layer.named_parameters()},
            'shapes': {n: list(p.shape) for n, p in layer.named_parameters()},
            'weight_rel_err': rel(dq13, w13), 'out_rel_err': rel(y, y_ref), 'out_rel_err_bf16': rel(y_ref.bfloat16().float(), y_ref),
            'out_norm': float(y_ref.norm())}


def assert_fp8_experts(r: dict) -> None:
    "A `probe_experts` result within FP8 error: e4m3 weights, their output against BF16 experts of the same weights, a non-zero reference."
    assert 0.005 < r['weight_rel_err'] < 0.04, r          # e4m3 rounding of the BF16 weights (3 mantissa bits; measured 0.025)
    assert 0.01 < r['out_rel_err'] < 0.08, r              # two e4m3 matmuls against BF16 experts on the same weights (measured 0.035-0.047)
    assert r['out_rel_err_bf16'] < 0.005, r               # while BF16 rounding alone of the reference is 0.002
    assert r['out_norm'] > 0, r                           # a probe whose activations are all clamped to zero proves nothing
