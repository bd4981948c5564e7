"""`mtp_lit.layouts` against real vLLM 0.32 (CPU): the draft module prefixes of the family table, and the expert layouts.

Each case builds a tiny checkpoint of one MTP family and starts vLLM in a fresh process (`tests/layouts_vllm_probe.py`)
with a probe quant config that records every prefix vLLM passes to `get_quant_method` while it builds the draft. The
recorded prefixes must be exactly `draft_modules(config)` (what `remap_exclusions` translates exclusions onto), and the
remapped exclusions of a checkpoint that excludes its whole draft by checkpoint name must exclude every recorded draft
module, and each MoE draft layer must have a draft attention layer in its own decoder layer (where
`draft_moe.padding_rows` reads vLLM's padding mask). For Qwen3.5-MoE the MTP experts are stored split in one checkpoint
and fused in the other: `expert_layouts` must tell them apart, and vLLM must load both into the same routed-expert weights
(each expert its own values).
~15-30 s per engine start, 6 starts (the split Qwen3.5-MoE probe serves both of its tests).
"""
import json, os, subprocess, sys
from pathlib import Path
import pytest
import torch
from safetensors.torch import load_file

pytest.importorskip("vllm")
pytestmark = pytest.mark.vllm
from mtp_lit.layouts import draft_layout, draft_modules, exclusion_match, expert_layouts, remap_exclusions
from mtp_lit.draft_moe import _decoder_layer

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import layouts_vllm_probe as probe   # noqa: E402


_PROBES = {}   # (family, fused) -> result: each probe engine starts once per session

def run_probe(family, tmp_path, fused=False):
    if (family, fused) in _PROBES: return _PROBES[family, fused]
    d = tmp_path / (family + ('-fused' if fused else ''))
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join([str(HERE), os.environ.get('PYTHONPATH', '')])}
    r = subprocess.run([sys.executable, str(HERE / 'layouts_vllm_probe.py'), family, str(d)] + (['--fused'] if fused else []),
                       capture_output=True, text=True, timeout=600, env=env)
    line = next((l for l in r.stdout.splitlines() if l.startswith('PROBE ')), None)
    assert r.returncode == 0 and line, f"probe {family} failed (rc {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    _PROBES[family, fused] = res = json.loads(line[6:]) | {'dir': str(d)}
    return res


# whole-draft exclusions written with checkpoint names, as the NVIDIA exports do (`mtp*`, `model.layers.61*`)
WHOLE_DRAFT = {'qwen3_5': ['mtp.*'], 'qwen3_5_moe': ['mtp.layers.0*', 'mtp.fc'], 'deepseek_v3': ['model.layers.2*'],
               'glm4_moe_lite': ['model.layers.2.*'], 'mimo': ['model.mtp_layers.0*']}


@pytest.mark.parametrize("family", list(WHOLE_DRAFT))
def test_draft_prefixes_match_family_table(family, tmp_path):
    cfg = probe.config(family)
    res = run_probe(family, tmp_path)
    seen = {p for p, _ in res['draft']}
    want = {m.vllm for m in draft_modules(cfg) if m.kind in ('linear', 'experts', 'head')}
    if family.startswith('qwen'): want.add('lm_head')      # Qwen3_5MTP's own ParallelLMHead (replaced by the target's after loading)
    assert seen == want, f"vLLM built the {family} draft as {sorted(seen)}, the family table says {sorted(want)}"
    qc = {'quantization': {'quant_algo': 'FP8', 'exclude_modules': WHOLE_DRAFT[family]}}
    remapped = remap_exclusions(qc, cfg)
    missed = [p for p in seen if p != 'lm_head' and exclusion_match(p, remapped) is None]
    assert not missed, f"remapped exclusions {remapped['quantization']['exclude_modules']} miss the draft modules {missed}"
    if family == 'mimo':    # checkpoint names alone never match MiMo's draft (model.mtp_layers.0 -> model.layers.2)
        assert all(exclusion_match(p, qc) is None for p in seen)
    assert 1 <= len(res['tokens']) <= 4           # the engine ran the draft (random weights may stop at EOS)
    for p in (p for p, c in res['draft'] if c in ('RoutedExperts', 'FusedMoE')):   # where `draft_moe.padding_rows` finds the padding
        assert any(a.startswith(_decoder_layer(p)) for a in res['attention']), f"no draft attention layer in {p}'s decoder layer: {res['attention']}"


def test_split_and_fused_mtp_experts_load_alike(tmp_path):
    cfg = probe.config('qwen3_5_moe')
    split, fused = run_probe('qwen3_5_moe', tmp_path), run_probe('qwen3_5_moe', tmp_path, fused=True)
    assert expert_layouts(split['names'], cfg) == {0: 'split'} and expert_layouts(fused['names'], cfg) == {0: 'fused'}
    lay = draft_layout(cfg)
    E, F, H = lay.num_experts, cfg['moe_intermediate_size'], cfg['hidden_size']
    for r in (split, fused):
        assert r['experts_shapes'] == [[E, 2 * F, H], [E, H, F]]
        assert r['experts_values_per_expert_match'], f"vLLM put other values in the {'fused' if r['fused'] else 'split'} MTP experts"
    a, b = (load_file(str(Path(r['dir']) / 'loaded_experts.safetensors')) for r in (split, fused))
    assert torch.equal(a['w13'], b['w13']) and torch.equal(a['w2'], b['w2']), "split and fused MTP experts load differently"
    assert split['tokens'] == fused['tokens']
