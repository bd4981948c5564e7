"""The real checkpoints' layouts, loaded: every miniature of `real_miniatures` (each fixture checkpoint's real config, quant
config, tensor names, expert layout and dtypes, shrunk to a few MB) has its MTP draft built by vLLM's own loader with the
mtp_lit plugin (`bad_inputs.load_drafts`: all cases in ONE subprocess, ~0.6 s a case), under each option:

- `none`: no option; `fp8`: MTP_FP8=1; `fp8-block`: MTP_FP8=1 MTP_FP8_SCHEME=block; `window16`: MTP_DRAFT_WINDOW=16
  (not for MLA drafts); `quantized`: `mtp_lit.convert.quantize` (per-channel, block where the draft is FP8 block already);
  `draft-vocab`: `mtp_lit.draft_vocab.build_draft_vocab` (K=128).

Each must load with every parameter finite (FP8 cases: with e4m3 parameters; `window16`: a 16-token window; `draft-vocab`:
a 128-row head), except where refusing is right (MTP_FP8 over a draft stored in FP8 already: a clear error). Without an
option, `mtp_lit.inspect_ckpt` must agree: a draft that loads is not reported unservable (`refused`), one the plugin refuses
is. What vLLM cannot run on a CPU (FP8 block GEMMs without AMX, Marlin NVFP4) is recognised by its error and skipped,
naming the limit. Known mtp_lit bugs are `xfail(strict=False)` with the bug named in the reason.
"""
import json, re, sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import real_miniatures as rm  # noqa: E402
from bad_inputs import load_drafts  # noqa: E402

from mtp_lit.convert import quantize
from mtp_lit.draft_vocab import build_draft_vocab
from mtp_lit.inspect_ckpt import inspect_checkpoint, refused

pytestmark = pytest.mark.vllm

MLA = {'DeepSeek-R1', 'DeepSeek-V3', 'GLM-4.7-Flash', 'nvidia-DeepSeek-V3-0324-NVFP4'}
FP8_BLOCK_DRAFT = {'DeepSeek-R1', 'DeepSeek-V3'}
NVFP4 = [n for n in rm.NAMES if n.startswith('nvidia-')]
ENVS = {'none': {}, 'fp8': {'MTP_FP8': '1'}, 'fp8-block': {'MTP_FP8': '1', 'MTP_FP8_SCHEME': 'block'},
        'window16': {'MTP_DRAFT_WINDOW': '16'}}
BUILT = ('quantized', 'draft-vocab')   # variant checkpoints, loaded with no option
K = 128

CPU_LIMITS = {   # error text -> the vLLM-on-CPU limit it shows (the checkpoint serves on a GPU)
    'requires AMX tile support': 'vLLM CPU: FP8 block-scaled GEMM needs AMX (Sapphire Rapids or newer)',
    'Marlin FP4 not available': 'vLLM CPU: NVFP4 W4A16 linears need the Marlin kernel (CUDA)',
    'linear/nvfp4/base.py': 'vLLM CPU 0.26: NVFP4 W4A16 linears need the Marlin kernel (CUDA; a bare assert there)',
    'MLA is not supported on CPU': 'vLLM CPU 0.26: no MLA attention backend',
    "FP8 draft experts need vLLM's expert routing": 'vLLM CPU 0.26: no expert routing for plugin MoE methods (mtp_lit refuses FP8 experts there)',
}
REFUSE = {   # case -> the refusal that is the right outcome
    **{f'{n}|{o}': 'in F8_E4M3 already' for n in FP8_BLOCK_DRAFT for o in ('fp8', 'fp8-block')},
}
XFAIL = {}   # case -> reason naming a known mtp_lit bug (none now)


def _tied(ckpt) -> bool:
    "Does the checkpoint's config.json tie the LM head to the embedding (top level or text_config)?"
    c = json.loads((Path(ckpt) / 'config.json').read_text())
    return bool(c.get('tie_word_embeddings', (c.get('text_config') or {}).get('tie_word_embeddings', False)))


def _options(name):
    return [o for o in ENVS if not (o == 'window16' and name in MLA)] + list(BUILT)


CASES = [f'{n}|{o}' for n in rm.NAMES for o in _options(n)]


def _param(case):
    marks = [pytest.mark.xfail(strict=False, reason=XFAIL[case])] if case in XFAIL else []
    return pytest.param(case, id=case, marks=marks)


def _variant(kind, src, dst, corpus):
    if kind == 'quantized':
        return quantize(src, dst, scheme='block' if src.name in FP8_BLOCK_DRAFT else 'per-channel', progress=False)
    return build_draft_vocab(src, corpus, K, dst, progress=False)


@pytest.fixture(scope='module')
def results(tmp_path_factory):
    """{case: load result (`load_drafts`) + 'ckpt'}, or {'error'} for a variant that could not be built; the miniatures,
    their variants and one load of every case."""
    root = tmp_path_factory.mktemp('real')
    corpus = root / 'corpus'; corpus.mkdir()
    for i in range(4): (corpus / f'{i}.py').write_text(f'def f{i}(x, y):\n    return x * {i} + y  # {i}\n' * (20 + i))
    cases, out = {}, {}
    for name in rm.NAMES:
        src = rm.build(name, root / 'mini')
        ea = [rm.ENGINE_ARGS[name]] if name in rm.ENGINE_ARGS else []
        for o in _options(name):
            case, ckpt = f'{name}|{o}', src
            if o in BUILT:
                try: ckpt = _variant(o, src, root / o / name, corpus)
                except Exception as e: out[case] = {'error': f'{o} failed: {type(e).__name__}: {e}'}; continue
            cases[case] = (ckpt, ENVS.get(o, {}), 1, *ea)
    res = load_drafts(cases, root / 'work', timeout=900)
    return {**out, **{c: {**r, 'ckpt': cases[c][0]} for c, r in res.items()}}


@pytest.mark.parametrize('case', [_param(c) for c in CASES])
def test_real_layout(results, case):
    name, option = case.split('|')
    r = results[case]
    if 'ckpt' not in r: pytest.fail(r['error'])
    limit = None if r['loaded'] else next((v for k, v in CPU_LIMITS.items() if k in r['error']), None)
    if option not in ENVS or option == 'none':   # no option: inspect's verdict must match the load
        rep = inspect_checkpoint(r['ckpt'])
        servable = r['loaded'] or limit is not None
        assert refused(rep) != servable, (f"inspect says {'unservable' if refused(rep) else 'servable'} ({rep['mtp_lit']}, gaps "
                                          f"{[g['kind'] for g in rep['gaps']]}) but the load {'failed: ' + r['error'] if not r['loaded'] else 'worked'}")
    if case in REFUSE:
        assert not r['loaded'] and re.search(REFUSE[case], r['error']), r['error'] or 'loaded'
        return
    if limit: pytest.skip(f'{limit}: {r["error"].splitlines()[0][:200]}')
    assert r['loaded'], r['error']
    assert r['nonfinite'] == [], r['nonfinite']
    if option.startswith('fp8') or option == 'quantized' or name in FP8_BLOCK_DRAFT:
        assert r['fp8'], 'no float8_e4m3fn parameter in an FP8 draft'
    if option == 'window16': assert r['windows'] == [16], r['windows']
    if option == 'draft-vocab': assert r['head'] and r['head'][0] == K, r['head']
    if _tied(r['ckpt']): assert r['tied'] is True, 'vLLM untied the embeddings of a tied checkpoint (a tensor named *lm_head.weight?)'
