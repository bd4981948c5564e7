"""Device-machine probe for issue 8, round 4b: the FP8 linear with its weight tiles loaded by the Tensor Memory
Accelerator (a host-side TensorDescriptor: one bulk copy per tile, issued by one thread, tracked by an mbarrier)
instead of per-thread cp.async, against the tuned kernel and a pure read, per linear of the Qwen3.5-27B draft step.
Run on the GPU: `PYTHONPATH=. python3 tools/gpu/tma_probe.py [--out DIR]`; writes tma_probe.json."""
import json, os, math, time, itertools, concurrent.futures as cf, multiprocessing as mp
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

MIN_SCALE = tl.constexpr(1.0 / (448.0 * 512.0))


@triton.jit
def tma_linear_kernel(x_ptr, w_desc, s_ptr, o_ptr, pv_ptr, pi_ptr, M, N, K, K_SPLIT, stride_xm, stride_om,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, A8: tl.constexpr, ARGMAX: tl.constexpr,
                      NUM_STAGES: tl.constexpr):
    """out[M, N] += x[M, K] @ (scale[N] * w[N, K])^T (float32 atomics), swap-AB (weights on the MMA's M side);
    ARGMAX: per-tile max and first index instead (K_SPLIT = K)."""
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    rm = tl.arange(0, BM)
    m_ok = rm < M
    n0 = pid_n * BN
    rn = n0 + tl.arange(0, BN)
    k_lo = pid_k * K_SPLIT
    k_hi = tl.minimum(k_lo + K_SPLIT, K)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BN, BM), dtype=tl.float32)
    for k0 in tl.range(k_lo, k_hi, BK, num_stages=NUM_STAGES):
        w = w_desc.load([n0, k0])
        x = tl.load(x_ptr + rm[:, None] * stride_xm + (k0 + rk)[None, :], mask=m_ok[:, None], other=0.0)
        if A8:
            xf = x.to(tl.float32)
            xs = tl.maximum(tl.max(tl.abs(xf), axis=1) / 448.0, MIN_SCALE)
            xq = (xf / xs[:, None]).to(tl.float8e4nv)
            acc += tl.dot(w, tl.trans(xq)) * xs[None, :]
        else:
            acc = tl.dot(w.to(tl.bfloat16), tl.trans(x.to(tl.bfloat16)), acc)
    acc = tl.trans(acc) * tl.load(s_ptr + rn)[None, :]
    if ARGMAX:
        v = acc.to(tl.bfloat16).to(tl.float32)
        vmax = tl.max(v, axis=1)
        tl.store(pv_ptr + rm * tl.num_programs(0) + pid_n, vmax, mask=m_ok)
        tl.store(pi_ptr + rm * tl.num_programs(0) + pid_n,
                 tl.min(tl.where(v == vmax[:, None], rn[None, :], 2147483647), axis=1), mask=m_ok)
    else:
        tl.atomic_add(o_ptr + rm[:, None] * stride_om + rn[None, :], acc, mask=m_ok[:, None], sem="relaxed")


def launch(x, w, s, out, c, argmax=None):
    M, K = x.shape
    N = w.shape[0]
    BM = max(16, triton.next_power_of_2(M))
    desc = TensorDescriptor.from_tensor(w, [c['BN'], c['BK']])
    split = 1 if argmax is not None else c['split']
    k_split = math.ceil(K / split / c['BK']) * c['BK']
    grid = (N // c['BN'], math.ceil(K / k_split))
    pv, pi = argmax if argmax is not None else (out, out)
    tma_linear_kernel[grid](x, desc, s, out if out is not None else x, pv, pi, M, N, K, k_split, x.stride(0),
                            out.stride(0) if out is not None else 0, BM=BM, BN=c['BN'], BK=c['BK'], A8=c['A8'],
                            ARGMAX=argmax is not None, NUM_STAGES=c['stages'], num_warps=c['warps'], num_stages=c['stages'])


def _warm(jobs):
    torch.cuda.set_device(0)
    for M, c, head in jobs:
        try:
            K = 2 * c['BK'] * (1 if head else c['split'])
            N = 2 * c['BN']
            w = (torch.randn(N, K, device='cuda') * 0.05).to(torch.float8_e4m3fn)
            s = torch.ones(N, device='cuda')
            x = torch.randn(M, K, device='cuda').to(torch.bfloat16)
            if head:
                T = N // c['BN']
                launch(x, w, s, None, c, argmax=(torch.empty(M, T, device='cuda'), torch.empty(M, T, device='cuda', dtype=torch.int32)))
            else:
                launch(x, w, s, torch.zeros(M, N, device='cuda'), c)
        except Exception as e:
            print('warm', M, c, type(e).__name__, str(e)[:200], flush=True)
    torch.cuda.synchronize()
    return len(jobs)


def main():
    from mtp_lit import _triton_kernels as tk
    from mtp_lit.bench import load_shapes, measure_bandwidth, draft_linears
    from mtp_lit.kernels import time_graph, quantize_fp8, reference_linear
    from probe_common import probe_args, time_tuned
    a, log = probe_args('tma_probe', lambda ap: ap.add_argument('--M', default='1,16'))
    t0 = time.time()
    Ms = [int(m) for m in a.M.split(',')]
    lay = [dict(BN=BN, BK=BK, A8=A8, stages=st, warps=4, split=sp) for BN in (64, 128) for BK in (128, 256)
           for A8 in (True, False) for st in (3, 4) for sp in (1, 2, 4, 8, 16)]
    head = [dict(BN=BN, BK=BK, A8=A8, stages=st, warps=4, split=1) for BN in (64, 128) for BK in (128, 256)
            for A8 in (True, False) for st in (3, 4, 6)]
    jobs = [(M, c, False) for M in Ms for c in lay] + [(M, c, True) for M in Ms for c in head]
    n = 16
    with cf.ProcessPoolExecutor(n, mp_context=mp.get_context('spawn')) as ex:
        list(ex.map(_warm, [jobs[i::n] for i in range(n)]))
    log(f'precompiled {len(jobs)} in {time.time() - t0:.0f} s')
    cfg = load_shapes()['Qwen3.5-27B']
    bw = measure_bandwidth()['roofline']
    log(f'read roofline {bw / 1e12:.2f} TB/s')
    rows = []
    g = torch.Generator(device='cuda').manual_seed(0)
    for name, N, K in draft_linears(cfg, 40960):
        w0 = (torch.randn(N, K, device='cuda', generator=g) * K ** -0.5).to(torch.bfloat16)
        q, s = quantize_fp8(w0, 'per-channel'); del w0
        s1 = s.reshape(-1).contiguous()
        qs = [q] + [q.clone() for _ in range(2)]
        is_head = name == 'head'
        for M in Ms:
            x = torch.randn(M, K, device='cuda', generator=g).to(torch.bfloat16)
            out = torch.zeros(M, N, device='cuda', dtype=torch.float32)
            t_tr = time_tuned(x, qs, s, out, is_head)
            res = []
            for c in (head if is_head else lay):
                try:
                    if is_head:
                        T = N // c['BN']
                        pv = torch.empty(M, T, device='cuda'); pi = torch.empty(M, T, device='cuda', dtype=torch.int32)
                        ids = torch.empty(M, device='cuda', dtype=torch.int64)
                        def f(w, c=c, pv=pv, pi=pi, ids=ids, T=T):
                            launch(x, w, s1, None, c, argmax=(pv, pi))
                            tk.argmax_finalize_kernel[(M,)](pv, pi, ids, T, BLOCK=max(16, 1 << (T - 1).bit_length()))
                    else:
                        def f(w, c=c): launch(x, w, s1, out, c)
                    t = time_graph([(lambda w=w, f=f: f(w)) for w in qs])
                except Exception as e:
                    log(f'   {name} M={M} {c}: {type(e).__name__} {str(e)[:200]}'); continue
                res.append((t, c))
            res.sort(key=lambda r: r[0])
            # correctness of the best against float64 (act_group = BK for W8A8)
            bt, bc = res[0]
            ref = reference_linear(x, q, s, act_group=bc['BK'] if bc['A8'] else None)
            if is_head:
                T = N // bc['BN']
                pv = torch.empty(M, T, device='cuda'); pi = torch.empty(M, T, device='cuda', dtype=torch.int32)
                ids = torch.empty(M, device='cuda', dtype=torch.int64)
                launch(x, q, s1, None, bc, argmax=(pv, pi))
                tk.argmax_finalize_kernel[(M,)](pv, pi, ids, T, BLOCK=max(16, 1 << (T - 1).bit_length()))
                ok = bool((ids == ref.to(torch.bfloat16).float().argmax(-1)).all())
            else:
                o2 = torch.zeros(M, N, device='cuda')
                launch(x, q, s1, o2, bc)
                ok = float((o2.double() - ref.double()).abs().max() / ref.double().abs().max()) < 1e-2
            rows.append(dict(name=name, N=N, K=K, M=M, triton_us=t_tr * 1e3, tma_us=bt * 1e3, cfg=bc, ok=ok,
                             top=[(r[0] * 1e3, r[1]) for r in res[:5]]))
            log(f'{name:13s} M={M:2d} tuned {t_tr * 1e3:6.1f} us | TMA best {bt * 1e3:6.1f} us {bc} ok {ok} | next '
                f'{[round(r[0] * 1e3, 1) for r in res[1:4]]}')
        del qs, q; torch.cuda.empty_cache()
    json.dump(dict(bw=bw, rows=rows, torch=torch.__version__, triton=triton.__version__), open(os.path.join(a.out, 'tma_probe.json'), 'w'), indent=1)
    log(f'done in {time.time() - t0:.0f} s')


if __name__ == '__main__':
    main()
