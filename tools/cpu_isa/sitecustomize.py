"""vLLM's CPU kernels pinned to their portable paths in every process of a test run: `MTP_LIT_CPU_AMX=0`, which the
Makefile's test targets set together with this folder on PYTHONPATH (so vLLM's engine and worker processes load it too).

On an x86 host with AMX tiles (Sapphire Rapids and newer) vLLM CPU takes other kernels: AMX linears, attention, Gated
DeltaNet and MoE paths, chosen in Python by `torch.cpu._is_amx_tile_supported()`. They refuse the tiny test checkpoints'
16-wide layers ("invalid weight input features 16"), and they round differently at different batch sizes, which moves
near-ties between plain decoding and a verify of k+1 tokens. The CPU suite asserts greedy tokens identical to plain
decoding and acceptance as recorded, so vLLM reads AMX as absent here and takes its portable kernels on every host.
oneDNN still picks its own ISA inside them (capping it with ONEDNN_MAX_CPU_ISA breaks vLLM's FP8 matmul primitive on
such a host). Nothing changes where the variable is not set."""
import os

if os.environ.get('MTP_LIT_CPU_AMX') == '0':
    try: import torch
    except ImportError: torch = None   # not installed yet (tools/setup-env on a fresh machine)
    if torch is not None: torch.cpu._is_amx_tile_supported = lambda: False
