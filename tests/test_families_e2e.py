"""Every row of `mtp_lit.plugin.DRAFTS` (Qwen3.5 dense and MoE, Qwen3-Next, DeepSeek-V3, GLM-4.5, GLM-4.7-Flash, MiMo) with its
draft in FP8 (`MTP_FP8=1`), on real vLLM CPU.

Checkpoints: `tiny_families.build` (random weights, real tensor names, a target close to a token permutation and a draft that
predicts it), so the winning logits are clear: greedy output is the permutation chain, which is also what plain decoding gives
(`test_permutation_target_is_plain_greedy` checks that once), and acceptance is ≈ 1 exactly when the FP8 draft's weights were
loaded under the right names and are used. One engine per family (~30-60 s each on a 2-core machine); 9 engines, ~4.5 min;
and one loader process (~25 s) that holds every family's online FP8 draft to its converted checkpoint's bytes.

The rows whose head applies `shared_head.norm` first are served with a truncated draft head in the same engine (`HEAD`): a
1024-row draft vocabulary of `mtp-lit draft-vocab` counted on the greedy chains (so the draft's proposals are among its ids),
FP8 on DeepSeek-V3, BF16 on GLM-4.5 (`MTP_FP8_HEAD=0`); GLM-4.7-Flash keeps the full head, vLLM's own.

Qwen3.5 dense is served in the layout its public releases use (`Qwen3_5ForConditionalGeneration`: `text_config` + `vision_config`,
the language model under `model.language_model.*`, `tiny_families.build_multimodal`) with vLLM's `language_model_only=True`; its
text-only `Qwen3_5ForCausalLM` layout is the package checkpoint's, served with the FP8 draft by `tests/test_plugin_e2e.py`."""
import sys
from pathlib import Path
import pytest
sys.path.insert(0, str(Path(__file__).parent))
import tiny_families as tf
from mtp_lit.demo import run_in_subprocess, RunSpec, demo_prompts

pytestmark = pytest.mark.vllm
PROMPTS = demo_prompts(2)
N = 24
INSPECT = {'worker_extension_cls': 'mtp_lit.demo.DraftInspector'}
DRAFT_CLASS = {'qwen3_5': 'Qwen3_5MTP', 'qwen3_5_moe': 'Qwen3_5MoeMTP', 'qwen3_next': 'Qwen3NextMTP', 'deepseek_v3': 'DeepSeekMTP',
               'glm4_moe': 'Glm4MoeMTP', 'glm4_moe_lite': 'Glm4MoeLiteMTP', 'mimo': 'MiMoMTP'}
KEPT_BF16 = {f: {'self_attn.kv_b_proj.weight'} for f in ('deepseek_v3', 'glm4_moe_lite')}   # MLA's kv_b_proj is absorbed into attention
PLAIN_LINEAR = {'deepseek_v3': 'eh_proj.weight', 'glm4_moe': 'eh_proj.weight', 'glm4_moe_lite': 'eh_proj.weight', 'mimo': 'input_proj.weight'}
MOE = {'qwen3_5_moe', 'qwen3_next', 'deepseek_v3', 'glm4_moe', 'glm4_moe_lite'}
LINEAR = ('proj.weight', 'fc.weight', 'w13_weight', 'w2_weight')
HEAD = {'deepseek_v3': {}, 'glm4_moe': {'MTP_FP8_HEAD': '0'}}   # rows with a head norm, served with a truncated head: FP8, BF16
K = 1024

def expected():
    from tokenizers import Tokenizer
    from mtp_lit.model import checkpoint_path
    tok = Tokenizer.from_file(str(checkpoint_path('qwen3_5-tiny') / 'tokenizer.json'))
    return [tf.expected_tokens(tok.encode(p).ids, N) for p in PROMPTS]

MULTIMODAL = {'qwen3_5'}   # built and served in the released multimodal layout

def with_draft_vocab(ckpt, dst):
    "`ckpt` with a K-row draft vocabulary of `mtp-lit draft-vocab` (in a copy at `dst`) counted on the tokens of the greedy chains."
    from tokenizers import Tokenizer
    from mtp_lit.draft_vocab import build_draft_vocab
    tok = Tokenizer.from_file(str(Path(ckpt) / 'tokenizer.json'))
    chains = Path(dst).parent / 'chains'; chains.mkdir()
    for i, x in enumerate(expected()): (chains / f'{i}.txt').write_text('\n'.join(tok.decode([t]) for t in x))
    return build_draft_vocab(ckpt, chains, K, dst, progress=False)

def run(name, ckpt, k, env, log_dir, engine_args=None):
    return run_in_subprocess(RunSpec(name, str(ckpt), k, env, PROMPTS, N, 512, engine_args={**INSPECT, **(engine_args or {})}),
                             log_dir=log_dir, quiet=True)

def test_permutation_target_is_plain_greedy(tmp_path):
    "The construction: plain greedy decoding (no MTP) of a tiny target gives the permutation chain `expected_tokens` computes."
    r = run('plain-deepseek', tf.build('deepseek_v3', tmp_path / 'ck'), 0, {}, tmp_path)
    assert r['tokens'] == expected()

@pytest.mark.parametrize('family', tf.FAMILIES)
def test_family_fp8_draft(family, tmp_path):
    mm = family in MULTIMODAL
    ckpt = (tf.build_multimodal if mm else tf.build)(family, tmp_path / family)
    if family in HEAD: ckpt = with_draft_vocab(ckpt, tmp_path / f'{family}-dv')
    r = run(f'{family}-fp8', ckpt, 3, {'MTP_FP8': '1', **HEAD.get(family, {})}, tmp_path, {'language_model_only': True} if mm else None)
    d = r['draft']
    assert d['class'] == f"mtp_lit.plugin.{DRAFT_CLASS[family]}"
    dts = d['param_dtypes']
    linears = {n: t for n, t in dts.items() if n.endswith(LINEAR)}
    bf16 = {n for n, t in linears.items() if t != 'float8_e4m3fn'}
    assert {n for n in bf16 if not n.endswith(tuple(KEPT_BF16.get(family, ())))} == set(), bf16
    assert len(bf16) == len(KEPT_BF16.get(family, ()))
    if family in PLAIN_LINEAR:                                       # vLLM's nn.Linear swapped for an FP8 vLLM linear
        assert [t for n, t in linears.items() if n.endswith(PLAIN_LINEAR[family])] == ['float8_e4m3fn']
    if family in MOE:                                                # routed experts in FP8
        assert sorted(t for n, t in dts.items() if n.endswith(('w13_weight', 'w2_weight'))) == ['float8_e4m3fn'] * 2
        assert all(dts[n + '_scale'] == 'float32' for n in dts if n.endswith(('w13_weight', 'w2_weight')))
    fp8_head = family in HEAD and HEAD[family].get('MTP_FP8_HEAD') != '0'
    assert set(d['fp8_digests']) == {n for n, t in linears.items() if t == 'float8_e4m3fn'} | ({'draft_lm_head.weight'} if fp8_head else set())
    if family in HEAD:                                               # the truncated head, after the family's shared_head.norm
        assert d['head_rows'] == {'draft_lm_head': K} and d['draft_vocab_ids'] == K
        assert d['param_shapes']['draft_lm_head.weight'] == [K, tf.H]
        assert dts['draft_lm_head.weight'] == ('float8_e4m3fn' if fp8_head else 'bfloat16')
        from mtp_lit.draft_vocab import load_draft_vocab
        assert {t for x in expected() for t in x} <= set(load_draft_vocab(ckpt).ids.tolist())   # the draft's proposals are in its vocabulary
    else: assert d['head_rows'] == {}
    assert r['tokens'] == expected()                                 # = plain greedy (clear winning logits)
    assert r['acceptance']['drafts'] > 0 and r['acceptance']['acceptance_rate'] > 0.95, r['acceptance']

def test_rejected_fp8_moe_drafts_never_change_output(tmp_path):
    "A draft that always proposes a wrong token (acceptance 0), FP8 experts included: the output is still the target's."
    r = run('wrong-draft', tf.build('qwen3_5_moe', tmp_path / 'ck', wrong_draft=True), 3, {'MTP_FP8': '1'}, tmp_path)
    assert r['draft']['param_dtypes']['model.layers.0.mlp.experts.routed_experts.w13_weight'] == 'float8_e4m3fn'
    assert r['acceptance']['drafts'] > 0 and r['acceptance']['acceptance_rate'] < 0.05, r['acceptance']
    assert r['tokens'] == expected()

def test_online_fp8_is_the_converters_bytes(tmp_path):
    """Every family's online per-channel FP8 draft (`MTP_FP8=1`) holds the draft parameters of its `mtp-lit quantize` checkpoint,
    byte for byte: e4m3 weights, their scales and the BF16 rest (vLLM's own draft loader, no engine; one process for all)."""
    import torch
    from safetensors.torch import load_file
    from mtp_lit.convert import quantize
    from bad_inputs import load_drafts
    cases = {}
    for f in tf.FAMILIES:
        src = tf.build(f, tmp_path / f)
        conv = quantize(src, tmp_path / f'{f}-conv', scheme='per-channel', overwrite=True, progress=False)
        for run_, ck, env in (('online', src, {'MTP_FP8': '1', 'MTP_FP8_SCHEME': 'per-channel'}), ('conv', conv, {})):
            cases[f'{f}/{run_}'] = (ck, env, 3, {}, {'dump': str(tmp_path / f'{f}-{run_}.safetensors')})
    res = load_drafts(cases, tmp_path / 'load')
    assert {n: r['error'] for n, r in res.items() if not r['loaded']} == {}
    raw = lambda t: t.view(torch.uint8) if t.dtype == torch.float8_e4m3fn else t
    for f in tf.FAMILIES:
        on, conv = (load_file(str(tmp_path / f'{f}-{r}.safetensors')) for r in ('online', 'conv'))
        assert sorted(on) == sorted(conv), f
        assert any(t.dtype == torch.float8_e4m3fn for t in on.values()), f
        assert [n for n in on if on[n].dtype != conv[n].dtype or not torch.equal(raw(on[n]), raw(conv[n]))] == [], f
