"""`mtp_lit.plugin.PROOFS` names pytest nodes that exist: the per-class table of the plugin page cannot point at a test that was
renamed or removed, or at a parameter its test no longer takes (the test modules are imported, nothing is run; ~3 s)."""
import importlib.util, sys
from pathlib import Path
import pytest
from mtp_lit.plugin import PROOFS, DRAFTS, SERVED, BUILT, BUILT_GPU, NOT_MTP

ROOT = Path(__file__).parent.parent


def _module(path: Path):
    sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location(f'_proof_{path.stem}', path)
        mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
        return mod
    finally: sys.path.remove(str(path.parent))


def node_exists(node: str) -> str | None:
    "None when pytest node `node` ('tests/f.py::test_x' or '...::test_x[param]') exists, else why it does not."
    path, _, name = node.partition('::')
    fn, _, param = name.partition('[')
    f = ROOT / path
    if not f.is_file(): return f"{path}: no such file"
    test = getattr(_module(f), fn, None)
    if not callable(test): return f"{path}: no test function {fn}"
    if not param: return None
    ids = [str(v) for m in getattr(test, 'pytestmark', []) if m.name == 'parametrize' for v in m.args[1]]
    return None if param.rstrip(']') in ids else f"{node}: {fn} is parametrized over {ids}"


@pytest.mark.parametrize('key', sorted(PROOFS))
def test_named_test_exists(key):
    how, node = PROOFS[key]
    assert how in (SERVED, BUILT, BUILT_GPU, NOT_MTP) and node.startswith('tests/gpu/test_' if how == BUILT_GPU else 'tests/test_'), (key, how, node)
    assert node_exists(node) is None, node_exists(node)


def test_every_row_is_served():
    assert {k for k, (how, _) in PROOFS.items() if how == SERVED} >= set(DRAFTS)


def test_eagle_drafts_are_not_mtp():
    """vLLM names a method-'eagle' draft 'Eagle' + the target's architecture (its `EAGLEConfig`): EagleDeepSeekMTPModel is the
    EAGLE draft of a DeepSeekMTPModel checkpoint, not an MTP draft; mtp_lit's plugin leaves it to vLLM and calls it that."""
    from transformers import PretrainedConfig
    from vllm import ModelRegistry
    from vllm.transformers_utils.configs.eagle import EAGLEConfig
    from mtp_lit.plugin import register, eagle_draft, draft_status, _GENERIC
    assert EAGLEConfig(model=PretrainedConfig(architectures=['DeepSeekMTPModel'], vocab_size=4096), method='eagle').architectures == ['EagleDeepSeekMTPModel']
    register()
    m = ModelRegistry.models['EagleDeepSeekMTPModel']
    assert (m.module_name, m.class_name) == ('vllm.model_executor.models.deepseek_eagle', 'EagleDeepseekV3ForCausalLM')   # vLLM's own
    assert ModelRegistry.models['DeepSeekMTPModel'].module_name == 'mtp_lit.plugin' and 'EagleDeepSeekMTPModel' not in _GENERIC
    rows = {r['key']: r for r in draft_status() if eagle_draft(r['key'])}
    assert {k: (r['status'], r['fp8'], r['proof']) for k, r in rows.items()} == {'EagleDeepSeekMTPModel': ('eagle', 'not applied', NOT_MTP)}


def test_a_wrong_name_is_caught():
    assert node_exists('tests/test_families_e2e.py::test_family_fp8_draft[deepseek_v9]').endswith("parametrized over "
        "['qwen3_5', 'qwen3_5_moe', 'qwen3_next', 'deepseek_v3', 'glm4_moe', 'glm4_moe_lite', 'mimo']")
    assert node_exists('tests/test_bad_inputs.py::test_engine_nothing') == 'tests/test_bad_inputs.py: no test function test_engine_nothing'
    assert node_exists('tests/test_nothing.py::test_x') == 'tests/test_nothing.py: no such file'
