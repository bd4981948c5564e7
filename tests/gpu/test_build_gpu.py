"""MTP draft classes that vLLM CPU cannot build, built on a GPU by vLLM's own draft loader with mtp_lit's options.

Skipped without CUDA and vLLM. On a GPU machine with vLLM installed:

    MTP_LIT_GPU_BUILD_RESULTS=nbs/results/build_gpu.json python -m pytest tests/gpu/test_build_gpu.py -ra

The same cases as `tests/generic_drafts.py` (tiny target configs, `--load-format dummy`, `MTP_FP8=1`, a 16-token draft window
unless the attention is MLA), in one loader process (`bad_inputs.load_drafts`), for the classes whose build needs CUDA:
DeepSeek-V4's MTP (vLLM CPU has a stub class), DeepSeek-V3.2's (indexer attention), Dots3's, Nemotron-H's with its MoE
MTP layer (pattern '*E': vLLM CPU cannot build the non-gated relu2 MoE), GLM-5-Next's (indexer attention) and Kimi-K3's (a
CUDA stream in its MLA block). A class the installed vLLM does not register is
skipped, naming the version. Asserts: mtp_lit's subclass of vLLM's class, every parameter finite, e4m3 parameters, the window
where set; or, for Nemotron-H's relu2 experts (`GPU_REFUSED`), the load's clear refusal of MTP_FP8 naming them."""
import json, os, re, sys
from pathlib import Path
import pytest

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
torch = pytest.importorskip('torch')
pytestmark = [pytest.mark.vllm, pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU (and vLLM): builds that need CUDA')]
import generic_drafts as gd  # noqa: E402
import generic_moe as gm  # noqa: E402

# the CUDA-only builds: registry key -> the tiny target config (generic_drafts'; Nemotron-H's with an MoE MTP layer, its layer types
# as the NemotronHConfig of vLLM 0.26 names them; DeepSeek-V4's with the output-LoRA and compression fields vLLM 0.26's class reads)
GPU_CONFIGS = {k: gd.TINY_CONFIGS[k] for k in ('DeepSeekV4MTPModel', 'DeepseekV32MTPModel', 'Dots3NoteMTPModel', 'Glm5NextMTPModel',
                                                'KimiK3MTPModel')}
GPU_CONFIGS['NemotronHMTPModel'] = {**gd.TINY_CONFIGS['NemotronHMTPModel'], 'layers_block_type': ['full_attention'],
                                    'mtp_layers_block_type': ['full_attention', 'moe'], 'mtp_hybrid_override_pattern': '*E'}
GPU_CONFIGS['DeepSeekV4MTPModel'] = {**GPU_CONFIGS['DeepSeekV4MTPModel'], 'o_lora_rank': 32, 'o_groups': 1, 'compress_ratios': [0, 0],
                                     'sliding_window': 16, 'head_dim': 32,
                                     'swiglu_limit': 10.0}   # a real limit: 0.0 clamps every expert activation to zero (vLLM's too)

GPU_ENGINE_ARGS = {'DeepSeekV4MTPModel': {'kv_cache_dtype': 'fp8'}}   # its fp8_ds_mla KV layout takes only an FP8 KV cache
# refused at load, with the error (mtp_lit's FP8 experts take gated MLPs only; Nemotron-H's MoE is one relu2 projection)
GPU_REFUSED = {'NemotronHMTPModel': r"^ValueError: mtp\.layers\.1\.mixer\.experts: FP8 draft experts need a gated MLP \(gate and up projections\)$"}
# the window refused at load, naming it (MLA and DeepSeek-V4's own SWA cache, not vLLM's Attention): FP8 alone
GPU_NO_WINDOW = {'DeepSeekV4MTPModel'}


def gpu_cases(root: Path) -> tuple:
    "(the cases for `bad_inputs.load_drafts` of every GPU config the installed vLLM registers, the keys it does not register)."
    from vllm.model_executor.models.registry import ModelRegistry
    have, cases = set(ModelRegistry.get_supported_archs()), {}
    for k in sorted(set(GPU_CONFIGS) & have):
        d = gd.tiny_generic(k, root / k)   # the CPU case's directory (processor, remote code), with the GPU config
        (d / 'config.json').write_text(json.dumps(GPU_CONFIGS[k] | ({'auto_map': json.loads((d / 'config.json').read_text())['auto_map']}
                                                                    if k in gd.REMOTE else {}), indent=1))
        cases[k] = (d, {'MTP_FP8': '1'} if k in GPU_NO_WINDOW else gd.env(k), 1, gd.engine_args(k) | GPU_ENGINE_ARGS.get(k, {}))
    return cases, sorted(set(GPU_CONFIGS) - have)


@pytest.fixture(scope='session')
def builds(tmp_path_factory):
    "Every GPU case that the installed vLLM registers, loaded in one process: {key: result}, also written to $MTP_LIT_GPU_BUILD_RESULTS."
    import vllm
    import bad_inputs
    root = tmp_path_factory.mktemp('build')
    cases, missing = gpu_cases(root)
    out = {'vllm': vllm.__version__, 'torch': torch.__version__, 'device': torch.cuda.get_device_name(), 'not_registered': missing,
           'runs': bad_inputs.load_drafts(cases, root / 'work') if cases else {}}
    if os.environ.get('MTP_LIT_GPU_BUILD_RESULTS'): Path(os.environ['MTP_LIT_GPU_BUILD_RESULTS']).write_text(json.dumps(out, indent=1))
    return out


@pytest.mark.parametrize('key', sorted(GPU_CONFIGS))
def test_build_on_gpu(builds, key):
    "vLLM's loader builds `key`'s draft on the GPU with MTP_FP8 (and the window unless MLA): see the module docstring."
    from mtp_lit.plugin import draft_status
    if key in builds['not_registered']: pytest.skip(f"vLLM {builds['vllm']} does not register {key}")
    row = next(r for r in draft_status() if r['key'] == key)
    h = builds['runs'][key]
    if key in GPU_REFUSED:
        assert not h['loaded'] and re.search(GPU_REFUSED[key], h['error']), h
        return
    gd.assert_built(h, row, windowless=key in gd.MLA | GPU_NO_WINDOW)
    if h.get('experts'):   # the FP8 routed experts against BF16 experts of the same weights, on the GPU (CPU builds: test_bad_inputs)
        gm.assert_fp8_experts(h['experts'])
