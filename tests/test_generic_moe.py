"""FP8 routed experts on the generic path: vLLM's `HYV3MTP` (Hunyuan V3, no row in the family table; its MTP layer is MoE)
built by vLLM's own draft loader with `MTP_FP8=1`, in one process and without an engine (`bad_inputs.load_draft`, ~20 s).

The checkpoint is a tiny config.json (4 experts of 32 rows, hidden size 64) read with vLLM's `--load-format dummy`: vLLM fills
every parameter with uniform values in [-1e-3, 1e-3] from a generator seeded 1234 per tensor, so the BF16 experts the FP8
method quantized are known exactly (`initialize_single_dummy_weight` on a tensor of the same shape) and serve as the reference.

Not served end to end: the suite's one engine start for the generic path serves ERNIE-4.5, whose MTP block is vLLM's dense
Llama layer, so no existing engine start has generic MoE experts, and CI has no time for another engine start.

`python tests/test_generic_moe.py MODEL_DIR OUT.json` builds the draft and writes what the test checks."""
import json, os, subprocess, sys
from pathlib import Path
import pytest

HERE = Path(__file__).parent
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


def _main(model_dir, out_json):
    "Build the FP8 draft of `model_dir`, run its routed experts on random tokens against BF16 experts of the same weights."
    import torch
    sys.path.insert(0, str(HERE))
    from bad_inputs import load_draft
    from vllm.model_executor.model_loader.weight_utils import initialize_single_dummy_weight
    torch.set_num_threads(1)
    m = load_draft(model_dir, 3, {'MTP_FP8': '1'}, {'load_format': 'dummy'})
    moe = [(n, x) for n, x in m.named_modules() if type(getattr(x, 'quant_method', None)).__name__ == 'Fp8DraftMoEMethod']
    name, layer = moe[0]
    ref = {}
    for p in ('w13_weight', 'w2_weight'):   # the BF16 tensors vLLM's dummy loader wrote before the FP8 method quantized them
        ref[p] = torch.empty(getattr(layer, p).shape, dtype=torch.bfloat16); initialize_single_dummy_weight(ref[p])
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(T, H, generator=g) * 0.5).bfloat16()
    ids = torch.stack([torch.randperm(E, generator=g)[:TOPK] for _ in range(T)]).to(torch.int32)
    tw = torch.softmax(torch.randn(T, TOPK, generator=g), -1)
    y = layer.quant_method.apply(layer, x, tw, ids, None, None).float()
    w13, w2, xf = ref['w13_weight'].float(), ref['w2_weight'].float(), x.float()
    y_ref = torch.zeros(T, H)
    for t in range(T):
        for j in range(TOPK):
            gate, up = (w13[ids[t, j]] @ xf[t]).chunk(2)
            y_ref[t] += tw[t, j] * (w2[ids[t, j]] @ (torch.nn.functional.silu(gate) * up))
    rel = lambda a, b: float((a - b).norm() / b.norm())
    dq13 = layer.w13_weight.float() * layer.w13_weight_scale[..., None]
    res = {'class': f'{type(m).__module__}.{type(m).__qualname__}', 'experts': name, 'n_fp8_moe_layers': len(moe),
           'dtypes': {n: str(p.dtype).removeprefix('torch.') for n, p in layer.named_parameters()},
           'shapes': {n: list(p.shape) for n, p in layer.named_parameters()},
           'weight_rel_err': rel(dq13, w13), 'out_rel_err': rel(y, y_ref), 'out_rel_err_bf16': rel(y_ref.bfloat16().float(), y_ref),
           'out_norm': float(y_ref.norm())}
    Path(out_json).write_text(json.dumps(res))


@pytest.fixture(scope='module')
def built(tmp_path_factory):
    d = tiny_hy_v3(tmp_path_factory.mktemp('hy_v3') / 'ck')
    out = d.parent / 'out.json'
    env = {**os.environ, 'VLLM_CPU_KVCACHE_SPACE': '1', 'HF_HUB_OFFLINE': '1', 'TRANSFORMERS_OFFLINE': '1', 'VLLM_NO_USAGE_STATS': '1',
           'OMP_NUM_THREADS': '1'}
    p = subprocess.run([sys.executable, __file__, str(d), str(out)], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads(out.read_text())


def test_generic_moe_experts_fp8(built):
    "HYV3MTP through the generic path: its routed experts in e4m3 with float32 scales, their output = BF16 experts' within FP8 error."
    r = built
    assert r['class'] == 'mtp_lit.plugin.HYV3MTP'
    assert (r['experts'], r['n_fp8_moe_layers']) == ('model.layers.1.mtp_block.mlp.experts.routed_experts', 1)
    assert r['dtypes'] == {'w13_weight': 'float8_e4m3fn', 'w2_weight': 'float8_e4m3fn', 'w13_weight_scale': 'float32', 'w2_weight_scale': 'float32',
                           'e_score_correction_bias': 'float32'}   # the router's bias stays float32
    assert {n: s for n, s in r['shapes'].items() if n.startswith('w')} == {'w13_weight': [E, 2 * I, H], 'w2_weight': [E, H, I],
                                                                          'w13_weight_scale': [E, 2 * I], 'w2_weight_scale': [E, H]}
    assert 0.005 < r['weight_rel_err'] < 0.04, r          # e4m3 rounding of the BF16 weights (3 mantissa bits; measured 0.025)
    assert 0.01 < r['out_rel_err'] < 0.08, r              # two e4m3 matmuls against BF16 experts on the same weights (measured 0.047)
    assert r['out_rel_err_bf16'] < 0.005, r               # while BF16 rounding alone of the reference is 0.002
    assert r['out_norm'] > 0


if __name__ == '__main__':
    _main(*sys.argv[1:3])
