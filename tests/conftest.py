import os, pytest

# vLLM on a small CPU machine (see ../shared/notes/vllm-cpu.md); each engine start costs 15-60 s.
for k, v in {'VLLM_CPU_KVCACHE_SPACE': '1', 'HF_HUB_OFFLINE': '1', 'TRANSFORMERS_OFFLINE': '1', 'VLLM_NO_USAGE_STATS': '1'}.items():
    os.environ.setdefault(k, v)

def pytest_configure(config):
    config.addinivalue_line('markers', 'vllm: starts a real vLLM engine (slow)')
    config.addinivalue_line('markers', 'gpu: needs CUDA')
