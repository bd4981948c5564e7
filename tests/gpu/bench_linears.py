"""The draft's FP8 linears and experts at every decode size, on the GPU: mtp_lit's served kernels against BF16 and vLLM's FP8.

    python tests/gpu/bench_linears.py --out nbs/bench/h200_linears.json
    python tests/gpu/bench_linears.py --scheme block --out nbs/bench/h200_linears_block.json
    python tests/gpu/bench_linears.py --experts-only --out /tmp/experts.json

For each Qwen3.5-27B MTP linear, the 40 960-row draft head, and M in 1 ... 256 tokens (a decode step of B sequences
drafts its first proposal on B(k+1) tokens): `fp8_linear` as the plugin calls it (e4m3 with `--scheme` scales, per-channel
by default; the Triton kernels, or from `SCALED_MM_MIN_M` tokens on W8A8 through vLLM's cutlass_scaled_mm), the Triton kernel alone (the tuned config),
the Triton kernel with the config tuned for accumulation into float32 (`use='acc'`) writing a new output,
`scaled_mm_linear`'s engine-free fallback alone (torch._scaled_mm; not for block scales),
cuBLAS in BF16 (`F.linear`: vLLM's unquantized draft), and vLLM's own FP8 linear (dynamic per-token e4m3 activations,
`cutlass_scaled_mm`: what vLLM's `quantization='fp8'` runs; under 128 x 128 block scales per-token-group activations
and CUTLASS's block FP8, what vLLM runs for a block-FP8 checkpoint). With per-channel scales, for the Qwen3.5-35B-A3B MTP layer's routed experts
(E = 256, top-8): `fp8_moe` as the plugin calls it (up to `MTP_LIT_MOE_GEMV_MAX_M` tokens the two GEMV launches, else
vLLM's fused-MoE kernel in W8A8), vLLM's fused-MoE kernel in W8A8 alone, the two GEMV launches alone (up to 16 tokens), the
grouped `moe_linear` path alone, and vLLM's fused-MoE kernel in BF16 (vLLM's unquantized draft). Each time is `mtp_lit.kernels.time_graph`'s (a CUDA graph of many calls rotating over
enough weight copies, or routings, that L2 serves nothing), with the bytes each call must read for the roofline."""
import argparse, functools, json, math, time
from pathlib import Path
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
MS = (1, 4, 16, 32, 64, 128, 256)


def _copies(nbytes, min_bytes=512 << 20): return max(2, math.ceil(min_bytes / nbytes))


def dense_rows(shapes, Ms, scheme='per-channel', log=print):
    from mtp_lit.fp8 import quantize_fp8, dequantize_fp8
    from mtp_lit.kernels import fp8_linear, select_config, time_graph, scaled_mm_linear
    g = torch.Generator(device='cuda').manual_seed(0)
    rows = []
    for name, N, K in shapes:
        n = _copies(N * K)
        ws = [quantize_fp8(torch.randn(N, K, device='cuda', generator=g) * K ** -0.5, scheme) for _ in range(n)]
        wb = [dequantize_fp8(q, s, (128, 128), torch.bfloat16).contiguous() for q, s in ws[:max(2, n // 2)]]
        sbytes = ws[0][1].numel() * 4
        for M in Ms:
            x = torch.randn(M, K, device='cuda', generator=g).to(torch.bfloat16)
            cfg, cfg_acc = select_config(M, N, K, scheme), select_config(M, N, K, scheme, use='acc')
            t = {'mtp_lit': [functools.partial(fp8_linear, x, q, s) for q, s in ws],
                 'mtp_lit_triton': [functools.partial(fp8_linear, x, q, s, config=cfg) for q, s in ws],
                 'mtp_lit_acc_config': [functools.partial(fp8_linear, x, q, s, config=cfg_acc) for q, s in ws],
                 'vllm_fp8': [functools.partial(scaled_mm_linear, x, q, s, scheme, use_vllm=True) for q, s in ws],   # vLLM's own pair
                 'bf16': [functools.partial(F.linear, x, w) for w in wb]}
            if scheme != 'block':
                t['mtp_lit_scaled_mm'] = [functools.partial(scaled_mm_linear, x, q, s, scheme, use_vllm=False) for q, s in ws]
            r = dict(kind='linear', name=name, N=N, K=K, M=M, scheme=scheme, fp8_bytes=N * K + sbytes + 2 * M * K + 2 * M * N,
                     bf16_bytes=2 * N * K + 2 * M * K + 2 * M * N)
            for k, fns in t.items():
                try: r[k] = time_graph(fns)
                except Exception as e: r[k] = None; log(f'  {name} M={M} {k}: {type(e).__name__}: {str(e)[:200]}')
            rows.append(r)
            log(f"{name:14s} M={M:3d} " + ' '.join(f"{k} {1e3 * r[k]:7.1f}" if r[k] else f"{k} -" for k in t) + ' us')
        del ws, wb
        torch.cuda.empty_cache()
    return rows


def moe_rows(E, top_k, H, I, Ms, log=print):
    from mtp_lit.draft_moe import fp8_moe, quantize_experts, _grouped_moe, _gemv_moe, _vllm_experts, MoEActivation
    from vllm.model_executor.layers.fused_moe import fused_moe  # noqa: F401  (registers torch.ops.vllm.fused_experts)
    from mtp_lit.kernels import time_graph
    g = torch.Generator(device='cuda').manual_seed(1)
    w13 = torch.randn(E, 2 * I, H, device='cuda', generator=g).bfloat16() * H ** -0.5
    w2 = torch.randn(E, H, I, device='cuda', generator=g).bfloat16() * I ** -0.5
    q13, s13 = quantize_experts(w13, 'per-channel', shards=2)
    q2, s2 = quantize_experts(w2, 'per-channel')
    rows = []
    for M in Ms:
        x = torch.randn(M, H, device='cuda', generator=g).bfloat16()
        routes = max(4, math.ceil(4 * E / (M * top_k)))   # enough routings that every expert is read between two reads of one
        ids = [torch.rand(M, E, device='cuda', generator=g).topk(top_k, -1).indices.int() for _ in range(routes)]
        tw = torch.rand(M, top_k, device='cuda', generator=g).softmax(-1)
        act = MoEActivation.SILU
        t = {'mtp_lit': [functools.partial(fp8_moe, x, q13, s13, q2, s2, tw, i) for i in ids],
             'mtp_lit_grouped': [functools.partial(_grouped_moe, x, q13, s13, q2, s2, tw, i.long(), None, act, False) for i in ids],
             'vllm_w8a8': [functools.partial(_vllm_experts, x, q13, s13, q2, s2, tw, i, None, act, None, False) for i in ids],
             'mtp_lit_gemv': [functools.partial(_gemv_moe, x, q13, s13, q2, s2, tw, i, None, act, False) for i in ids] if M <= 16 else [],
             'bf16': [functools.partial(torch.ops.vllm.fused_experts, hidden_states=x, w1=w13, w2=w2, topk_weights=tw, topk_ids=i) for i in ids]}
        used = float(torch.stack([torch.bincount(i.flatten().long(), minlength=E) > 0 for i in ids]).float().sum(-1).mean())
        r = dict(kind='experts', E=E, top_k=top_k, H=H, I=I, M=M, experts_read=used, fp8_bytes=int(used * 3 * I * H),
                 bf16_bytes=int(used * 6 * I * H))
        for k, fns in t.items():
            try: r[k] = time_graph(fns) if fns else None
            except Exception as e: r[k] = None; log(f'  experts M={M} {k}: {type(e).__name__}: {str(e)[:200]}')
        rows.append(r)
        log(f"experts E={E} M={M:3d} ({used:.0f} read) " + ' '.join(f"{k} {1e3 * r[k]:7.1f}" if r[k] else f"{k} -" for k in t) + ' us')
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--out', required=True)
    ap.add_argument('--Ms', nargs='*', type=int, default=list(MS))
    ap.add_argument('--scheme', default='per-channel', choices=['per-tensor', 'per-channel', 'block'],
                    help="the weights' scales (128 x 128 blocks for 'block'); the routed experts are timed with 'per-channel' only")
    ap.add_argument('--experts-only', action='store_true', help='only the routed experts (per-channel), not the dense linears')
    a = ap.parse_args(argv)
    import vllm
    from mtp_lit.bench import measure_bandwidth   # the read roofline, measured in the same run
    shapes = json.loads((ROOT / 'mtp_lit' / 'data' / 'shapes.json').read_text())
    s27, s35 = shapes['Qwen3.5-27B'], shapes['Qwen3.5-35B-A3B']
    dense = [(n, N, K) for n, N, K in s27['mtp_linears']] + [('draft_head', 40960, s27['hidden_size'])]
    t0 = time.time()
    rec = {'environment': {'device': torch.cuda.get_device_name(), 'torch': torch.__version__, 'vllm': vllm.__version__,
                           'cuda': torch.version.cuda, 'date': time.strftime('%Y-%m-%d')},
           'bandwidth': measure_bandwidth(), 'scheme': f"{a.scheme} e4m3 weights, bf16 activations"}
    rec['rows'] = [] if a.experts_only else dense_rows(dense, a.Ms, a.scheme)
    if a.scheme == 'per-channel':
        m = s35['moe']
        rec['rows'] += moe_rows(m['num_experts'], m['top_k'], s35['hidden_size'], m['moe_intermediate_size'], a.Ms)
    rec['seconds'] = round(time.time() - t0, 1)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(rec, indent=1))
    print(f"wrote {a.out} ({rec['seconds']} s)")


if __name__ == '__main__':
    main()
