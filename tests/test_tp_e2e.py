"""Tensor parallelism on real vLLM CPU: every draft feature at TP=2 (`VLLM_CPU_OMP_THREADS_BIND='0|1'`, one core a rank).

Seven engine starts (~60-80 s each here), the features combined so that each start covers several:
dense plain; dense FP8 online per-channel + truncated head (K = 1024) + 16-token window; dense converted per-tensor FP8;
dense converted 64x64-block FP8 with UE8M0 scales; MoE plain; MoE FP8 online per-tensor (split experts); MoE fused experts converted per-channel. Prompts,
tokens and checkpoints are the serving matrix's (`tests/gpu/serve_matrix.py`), so each run's acceptance length is held to
the same run at TP=1 on vLLM CPU (`nbs/results/serve_cpu.json`). Asserts: greedy tokens identical to plain TP=2; τ within
5 % of TP=1's; on each rank the draft's linears and experts are e4m3 with this rank's rows and scales, the truncated head
holds K/2 rows (sharded by vocabulary, like vLLM's LM head), the window is on the draft's attention. 128x128 block FP8 does not
fit these checkpoints at TP=2 (320 of `down_proj`'s input columns a rank): refused at build time, tested in `07_draft_linear`."""
import json, sys
from pathlib import Path
import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE / 'gpu'))
import serve_matrix as sm   # noqa: E402
from mtp_lit.demo import run_in_subprocess, RunSpec, demo_prompts   # noqa: E402

pytestmark = pytest.mark.vllm
TP = {'VLLM_CPU_OMP_THREADS_BIND': '0|1'}   # the ranks are worker processes (vLLM's mp executor); the engine core stays in-process
CPU = json.loads((HERE.parent / 'nbs' / 'results' / 'serve_cpu.json').read_text())['runs']
DENSE, MOE = sm.EMBEDDED
RUNS = {  # name: (checkpoint key, k, env); the names of serve_cpu.json's runs
    f'{DENSE}/plain': (DENSE, 0, {}),
    f'{DENSE}/fp8-head-window': (f'{DENSE}/head', sm.K, sm.COMBO),
    f'{DENSE}/conv-tensor': (f'{DENSE}/conv-tensor', sm.K, {}),
    f'{DENSE}/conv-block64-ue8m0': (f'{DENSE}/conv-block64-ue8m0', sm.K, {}),
    f'{MOE}/plain': (MOE, 0, {}),
    f'{MOE}/fp8-tensor': (MOE, sm.K, {'MTP_FP8': '1', 'MTP_FP8_SCHEME': 'per-tensor'}),
    f'{MOE}/fused-conv-channel': (f'{MOE}/fused-conv-channel', sm.K, {}),
}

@pytest.fixture(scope='module')
def tp2(tmp_path_factory):
    from mtp_lit.convert import fuse_experts, quantize
    work = tmp_path_factory.mktemp('tp2')
    ck = sm.build_checkpoints(work, families=())
    fused = fuse_experts(ck[MOE], work / 'moe-fused', progress=False)
    ck[f'{MOE}/fused-conv-channel'] = quantize(fused, work / 'moe-fused-conv-channel', scheme='per-channel', progress=False)
    P = demo_prompts(sm.N_PROMPTS)
    return {n: run_in_subprocess(RunSpec(n.replace('/', '--'), str(ck[c]), k, {**TP, **env}, P, sm.N_TOKENS, 1024,
                                         {'tensor_parallel_size': 2}), log_dir=work / 'logs', quiet=True)
            for n, (c, k, env) in RUNS.items()}

def mtp(runs): return {n: r for n, r in runs.items() if r['k']}

def test_greedy_tokens_identical_to_plain_tp2(tp2):
    for n, r in mtp(tp2).items():
        assert r['tokens'] == tp2[n.split('/')[0] + '/plain']['tokens'], n
        assert r['acceptance']['drafts'] > 0, n

def test_acceptance_as_at_tp1(tp2):
    "τ at TP=2 within 5 % of the same run at TP=1 (the fused checkpoint's: the split one's, same bytes)."
    far = {}
    for n, r in mtp(tp2).items():
        g, c = r['acceptance']['mean_acceptance_length'], CPU[n.replace('fused-', '')]['acceptance']['mean_acceptance_length']
        if abs(g - c) > 0.05 * c: far[n] = (round(g, 3), round(c, 3))
    assert far == {}

def _rows(ckpt: str, names) -> int:
    "Rows of the checkpoint tensors `names` together (the unsharded output width of the linear they load into)."
    from safetensors import safe_open
    from mtp_lit.model import checkpoint_path
    with safe_open(str(checkpoint_path(ckpt) / 'model.safetensors'), 'pt') as f: return sum(f.get_slice(n).get_shape()[0] for n in names)

def test_every_rank_holds_its_shard(tp2):
    "Each rank: e4m3 draft linears and experts with half the output rows (column-parallel) or half the input (row-parallel), each with its own scales."
    from mtp_lit.options import read_config
    from mtp_lit.model import checkpoint_path
    qkv = {ck: _rows(ck, [f'mtp.layers.0.self_attn.{x}_proj.weight' for x in 'qkv']) for ck in (DENSE, MOE)}
    I = read_config(checkpoint_path(MOE))['moe_intermediate_size']
    for n, r in mtp(tp2).items():
        ranks = r['draft_ranks']
        assert [d['tp'] for d in ranks] == [[0, 2], [1, 2]], n
        for d in ranks:
            dt, sh = d['param_dtypes'], d['param_shapes']
            w = [p for p in dt if p.endswith(('proj.weight', 'fc.weight', 'w13_weight', 'w2_weight'))]
            assert w and all(dt[p] == 'float8_e4m3fn' for p in w), (n, {p: dt[p] for p in w})
            assert all(dt.get(p + '_scale', dt.get(p + '_scale_inv')) == 'float32' for p in w), n
            if 'block64' in n:   # block scales of this rank's blocks: [rows / 64, input columns / 64]
                assert sh['model.layers.0.mlp.down_proj.weight_scale'] == [sh['model.layers.0.mlp.down_proj.weight'][0] // 64,
                                                                              sh['model.layers.0.mlp.down_proj.weight'][1] // 64], n
            assert sh['model.layers.0.self_attn.qkv_proj.weight'][0] == qkv[n.split('/')[0]] // 2, (n, sh['model.layers.0.self_attn.qkv_proj.weight'])
            if n.startswith(MOE):
                E, N, H = sh['model.layers.0.mlp.experts.routed_experts.w13_weight']
                assert N == 2 * I // 2 and sh['model.layers.0.mlp.experts.routed_experts.w2_weight'] == [E, H, I // 2], (n, sh)

def test_truncated_head_sharded_by_vocabulary(tp2):
    for d in tp2[f'{DENSE}/fp8-head-window']['draft_ranks']:
        assert d['head_rows'] == {'draft_lm_head': sm.HEAD_K} and d['head_rows_on_rank'] == {'draft_lm_head': sm.HEAD_K // 2}
        assert d['param_shapes']['draft_lm_head.weight'][0] == sm.HEAD_K // 2 and d['draft_vocab_ids'] == sm.HEAD_K
        assert d['param_dtypes']['draft_lm_head.weight'] == 'float8_e4m3fn'
        assert set(d['attention_windows'].values()) == {sm.WINDOW}
