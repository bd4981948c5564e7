"""Device-machine probe for issue 8, round 4: the register-fed CUDA FP8 linear (`mma_linear.py`) against the tuned
Triton kernel and a pure read of the same bytes, per linear of the Qwen3.5-27B draft step, then the whole step with
the best configs. Run on the GPU: `PYTHONPATH=. python3 tools/gpu/mma_probe.py [--out DIR]`; writes mma_probe.json."""
import json, os, math, sys, time, itertools, concurrent.futures as cf
import torch
sys.path.insert(0, os.path.dirname(__file__))
import mma_linear as ml
from probe_common import probe_args, time_tuned
from mtp_lit import _triton_kernels as tk
from mtp_lit.bench import load_shapes, measure_bandwidth, draft_linears, DraftStep
from mtp_lit.kernels import pdl_launch, time_graph, quantize_fp8, dequantize
from mtp_lit.fp8 import MIN_SCALE

READS = ((4096, 8, 8), (2048, 16, 4), (8192, 4, 8), (4096, 32, 8), (4096, 4, 8), (2048, 8, 4))


def ref_mma(x, q, s, mode, k_split, act=None):
    "float64 emulation of mma_linear: activations quantised per token over each K slice of k_split columns."
    xf = x.float()
    if act:
        K = xf.shape[1] // 2
        xf = xf[:, :K] / (1 + torch.exp(-xf[:, :K])) * xf[:, K:]
    w = dequantize(q, s, dtype=torch.float64)
    M, K = xf.shape
    y = torch.zeros(M, w.shape[0], dtype=torch.float64, device=x.device)
    for k0 in range(0, K, k_split):
        xs = xf[:, k0:k0 + k_split]
        am = xs.abs().amax(1)
        sc = (am / torch.full_like(am, 448.0)).clamp_min(MIN_SCALE)  # a true division, as the kernel (torch turns / 448.0 into * (1/448))
        xq = (xs / sc[:, None]).clamp(-448, 448).to(torch.float8_e4m3fn).double() * sc.double()[:, None]
        y += xq @ w[:, k0:k0 + k_split].T
    return y


def ref_w8a16(x, q, s, act=None):
    "float64 reference of the MMA 2 path: act(x) rounded to bf16 (float32 inputs too), weights dequantised exactly."
    xf = x.float()
    if act:
        K = xf.shape[1] // 2
        xf = xf[:, :K] / (1 + torch.exp(-xf[:, :K])) * xf[:, K:]
    return xf.to(torch.bfloat16).double() @ dequantize(q, s, dtype=torch.float64).T


def ksplit(K, split, WK):
    return min(K, math.ceil(K / split / 32 / WK) * 32 * WK)


def check_small(log):
    "correctness on small shapes: scale modes, out modes, float32 input, SiluAndMul, MT 1/2, WK 1/2/4"
    small = [(MT, 4, 4, sm, o, xf, act, 0, 0, 1, mma) for MT in (1, 2) for sm in (1, 2, 3) for o in (0, 1, 2)
             for xf in (0, 1) for act in (0, 1) for mma in (1, 2)]
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda k: ml.cubin(*k), small))
    g = torch.Generator(device='cuda').manual_seed(1)
    fails = 0
    for mma, mode, M, WK, act, xf32, outm in itertools.product((1, 2), ('channel', 'tensor', 'block'), (1, 5, 9, 16), (None, 3),
                                                          (None, 'silu_mul'), (False, True), ('bf16', 'acc', 'argmax')):
        N, K = 384, 1024
        w0 = torch.randn(N, K, device='cuda', generator=g) * K ** -0.5
        q, s = quantize_fp8(w0.to(torch.bfloat16), {'channel': 'per-channel', 'tensor': 'per-tensor', 'block': 'block'}[mode])
        if mode == 'tensor': s = s.reshape(1)
        p = ml.pack_mma(q)
        x = torch.randn(M, K * (2 if act else 1), device='cuda', generator=g)
        x = x if xf32 else x.to(torch.bfloat16)
        split = 4 if outm == 'acc' else 1
        ks = ksplit(K, split, 1)
        ref = ref_mma(x, q, s, mode, ks, act) if mma == 1 else ref_w8a16(x, q, s, act)
        if outm == 'bf16':
            y = ml.mma_linear(x, p, s, mode, act=act, ctas=WK, U=4, mma=mma)
            err = float((y.double() - ref).abs().max() / ref.abs().max()); ok = err < 1e-2
        elif outm == 'acc':
            out = torch.ones(M, N, device='cuda')
            ml.mma_linear(x, p, s, mode, out=out, act=act, ctas=WK, U=4, split=split, mma=mma)
            err = float((out.double() - 1 - ref).abs().max() / ref.abs().max()); ok = err < 2e-4
        else:
            T = N // 16
            pv = torch.empty(M, T, device='cuda'); pi = torch.empty(M, T, device='cuda', dtype=torch.int32)
            ml.mma_linear(x, p, s, mode, act=act, ctas=WK, U=4, argmax=(pv, pi), mma=mma)
            ids = torch.empty(M, device='cuda', dtype=torch.int64)
            tk.argmax_finalize_kernel[(M,)](pv, pi, ids, T, BLOCK=max(16, 1 << (T - 1).bit_length()))
            refi = ref.to(torch.bfloat16).float().argmax(-1)
            err = float((ids != refi).sum()); ok = err == 0
        if not ok or (outm == 'acc' and M in (1, 16) and not act and WK is None):
            fails += not ok
            log(f'{"FAIL" if not ok else "ok"} mma={mma} {mode} M={M} ctas={WK} act={act} xf32={xf32} out={outm}: err {err:.3g}')
    log(f'small-shape checks: {fails} failures')
    return fails


def main():
    a, log = probe_args('mma_probe', lambda ap: (ap.add_argument('--M', default='1,4,16'),
                                                 ap.add_argument('--quick', action='store_true')))
    t0 = time.time()
    Ms = [int(m) for m in a.M.split(',')]
    # compile everything in parallel (NVRTC releases the GIL)
    lay = [(MT, WN, U, 2, 1, 0, 0, 0, 0, int(mma > 0), mma, lo) for mma in (0, 1, 2) for MT in (1, 2) for WN in (4, 8) for U in (8, 16) for lo in (0, 1)]
    head = [(MT, WN, U, 2, 2, 0, 0, 0, 0, int(mma > 0), mma, lo) for mma in (0, 1, 2) for MT in (1, 2) for WN in (4, 8) for U in (8, 16) for lo in (0, 1)]
    small = []
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda k: ml.cubin(*k), lay + head + small))
    for k in lay + head + small: ml.kernel(*k)
    log(f'compiled {len(set(lay + head + small))} kernels in {time.time() - t0:.0f} s')
    fails = check_small(log)
    cfg = load_shapes()['Qwen3.5-27B']
    bw = measure_bandwidth()['roofline']
    log(f'read roofline {bw / 1e12:.2f} TB/s')
    rows, best = [], {}
    g = torch.Generator(device='cuda').manual_seed(0)
    for name, N, K in draft_linears(cfg, 40960):
        w0 = (torch.randn(N, K, device='cuda', generator=g) * K ** -0.5).to(torch.bfloat16)
        q, s = quantize_fp8(w0, 'per-channel'); del w0
        qs = [q] + [q.clone() for _ in range(2)]
        ps = [ml.pack_mma(x) for x in qs]
        ps1 = [ml.pack_mma(x, 1) for x in qs]
        byt = N * K
        ints = [x.view(torch.int32).view(-1) for x in qs]
        t_read = min(time_graph([(lambda a=a_, c=c: tk.read_kernel[(math.ceil(a.numel() / (c[0] * c[1])),)](
            a, outs[c], a.numel(), BLOCK=c[0], ITERS=c[1], num_warps=c[2])) for a_ in ints])
            for c in READS for outs in [{c: torch.empty(math.ceil(ints[0].numel() / (c[0] * c[1])), dtype=torch.int32, device='cuda')}])
        rows.append(dict(name=name, N=N, K=K, M=0, what='read', us=t_read * 1e3))
        log(f'{name:14s} {N}x{K} read {t_read * 1e3:6.1f} us {byt / t_read / 1e9:.2f} TB/s')
        is_head = name == 'head'
        for M in Ms:
            x = torch.randn(M, K, device='cuda', generator=g).to(torch.bfloat16)
            out = torch.zeros(M, N, device='cuda', dtype=torch.float32)
            T = N // 16
            pv = torch.empty(M, T, device='cuda'); pi = torch.empty(M, T, device='cuda', dtype=torch.int32)
            ids = torch.empty(M, device='cuda', dtype=torch.int64)
            t_tr = time_tuned(x, qs, s, out, is_head)
            rows.append(dict(name=name, N=N, K=K, M=M, what='triton', us=t_tr * 1e3))
            MT = 1 if M <= 8 else 2
            cands = []
            nsm = torch.cuda.get_device_properties(0).multi_processor_count
            if is_head:
                for lo, mma, WN, U, occ in itertools.product((0, 1), (1, 2), (4, 8), (8, 16), (None, 1, 2, 3)):
                    cands.append(dict(layout=lo, mma=mma, WN=WN, U=U, split=1, ctas=occ and occ * nsm))
            else:
                for lo, mma, WN, U, split, occ in itertools.product((0, 1), (1, 2), (4, 8), (8,), (1, 4, 16), (None, 2, 4)):
                    if ml.smem_bytes(K, ksplit(K, split, 1), MT, WN, U, mma) > 110 * 1024: continue
                    ns = math.ceil(K / ksplit(K, split, 1))
                    cands.append(dict(layout=lo, mma=mma, WN=WN, U=U, split=split, ctas=occ and math.ceil(occ * nsm / ns)))
            if a.quick: cands = cands[::4]
            res = []
            for c in cands:
                try:
                    if is_head:
                        def f(p, c=c):
                            ml.mma_linear(x, p, s, argmax=(pv, pi), **c)
                            tk.argmax_finalize_kernel[(M,)](pv, pi, ids, T, BLOCK=max(16, 1 << (T - 1).bit_length()))
                    else:
                        def f(p, c=c): ml.mma_linear(x, p, s, out=out, **c)
                    t = time_graph([(lambda p=p, f=f: f(p)) for p in (ps1 if c.get('layout') else ps)])
                except Exception as e:
                    log(f'   M={M} {c}: {type(e).__name__} {str(e)[:160]}'); continue
                res.append((t, c))
                rows.append(dict(name=name, N=N, K=K, M=M, what='mma', cfg=c, us=t * 1e3))
            res.sort(key=lambda r: r[0])
            # correctness of the 3 best
            for t, c in res[:3]:
                if is_head:
                    ml.mma_linear(x, (ps1 if c.get('layout') else ps)[0], s, argmax=(pv, pi), **c)
                    tk.argmax_finalize_kernel[(M,)](pv, pi, ids, T, BLOCK=max(16, 1 << (T - 1).bit_length()))
                    ref = ref_mma(x, q, s, 'channel', K) if c['mma'] == 1 else ref_w8a16(x, q, s)
                    ok = bool((ids == ref.to(torch.bfloat16).float().argmax(-1)).all())
                else:
                    o2 = torch.zeros(M, N, device='cuda')
                    ml.mma_linear(x, (ps1 if c.get('layout') else ps)[0], s, out=o2, **c)
                    ref = ref_mma(x, q, s, 'channel', ksplit(K, c['split'], 1)) if c['mma'] == 1 else ref_w8a16(x, q, s)
                    ok = float((o2.double() - ref).abs().max() / ref.abs().max()) < 2e-4
                if not ok: log(f'   WRONG {name} M={M} {c}'); fails += 1
            pro0 = []
            for t, c in res[:3]:
                c0 = dict(c, mma=0)
                if is_head:
                    f0 = lambda p, c0=c0: ml.mma_linear(x, p, s, argmax=(pv, pi), pro=0, **c0)
                else:
                    f0 = lambda p, c0=c0: ml.mma_linear(x, p, s, out=out, pro=0, **c0)
                pro0.append(round(time_graph([(lambda p=p, f0=f0: f0(p)) for p in (ps1 if c.get('layout') else ps)]) * 1e3, 1))
            bt, bc = res[0]
            best[(name, M)] = bc
            for lo in (0, 1):
                for mm in (1, 2):
                    r = [x for x in res if x[1].get('layout', 0) == lo and x[1]['mma'] == mm]
                    if r: log(f'      layout {lo} mma {mm}: {r[0][0] * 1e3:6.1f} us {r[0][1]}')
            log(f'   M={M:2d} triton {t_tr * 1e3:6.1f} us | mma best {bt * 1e3:6.1f} us {bc} | read {t_read * 1e3:6.1f} | '
                f'next {[round(r[0] * 1e3, 1) for r in res[1:4]]} | no MMA, no activation pass (top 3) {pro0}')
        del qs, ps, ps1, ints, q; torch.cuda.empty_cache()
    log(f'linear sweep done at {time.time() - t0:.0f} s')
    # the whole step: Triton tuned (the committed DraftStep) against the same step with mma linears
    steps = {}
    base = DraftStep(cfg, 'fp8-mtp_lit', head_rows=40960)
    packed = {n: ml.pack_mma(w) for n, (w, sc) in base.w.items() if sc is not None}
    packed1 = {n: ml.pack_mma(w, 1) for n, (w, sc) in base.w.items() if sc is not None}

    class MmaStep(DraftStep):
        fuse_act = False
        def lin(self, x, name, residual=None, act=None):
            w, sc = self.w[name]
            M = x.shape[0]
            if residual is not None and residual.dtype == torch.float32 and (name, M) in best:
                c = best[(name, M)]
                ml.mma_linear(x, (packed1 if c.get('layout') else packed)[name], sc, out=residual, act=act, pdl=True, **c)
                return residual
            return super().lin(x, name, residual, act)
        def _silu_mul(self, x):
            return x if self.fuse_act else super()._silu_mul(x)
        def __call__(self, emb, hid):
            h = self.hidden(emb, hid)
            M = h.shape[0]
            if ('head', M) not in best: return super().__call__(emb, hid)
            T = 40960 // 16
            pv = torch.empty(M, T, device='cuda'); pi = torch.empty(M, T, device='cuda', dtype=torch.int32)
            ids = torch.empty(M, device='cuda', dtype=torch.int64)
            w, sc = self.w['head']
            ml.mma_linear(h, (packed1 if best[('head', M)].get('layout') else packed)['head'], sc, argmax=(pv, pi), pdl=True, **best[('head', M)])
            tk.argmax_finalize_kernel[(M,)](pv, pi, ids, T, BLOCK=4096, **pdl_launch(h))
            return ids
    st = MmaStep.__new__(MmaStep); st.__dict__.update(base.__dict__)
    from mtp_lit.bench import step_bytes
    step_rows = []
    for M in Ms:
        H = cfg['hidden_size']
        emb = torch.randn(M, H, device='cuda', generator=g).to(torch.bfloat16)
        hid = torch.randn(M, H, device='cuda', generator=g).to(torch.bfloat16)
        rb = step_bytes(cfg, M, weight_bytes=1, head_rows=40960)['total']
        roof = rb / bw * 1e3
        t_b = time_graph([lambda: base(emb, hid)])
        tok_b = base(emb, hid)
        st.fuse_act = False
        t_m = time_graph([lambda: st(emb, hid)])
        tok_m = st(emb, hid)
        # the down_proj with SiluAndMul fused into its prologue (x = the float32 gate_up accumulator)
        def down_fused(self_, x, name, residual=None, act=None, _orig=MmaStep.lin):
            return _orig(self_, x, name, residual, 'silu_mul' if name == 'down_proj' else act)
        st.fuse_act = True
        MmaStep.lin, orig = down_fused, MmaStep.lin
        try:
            t_f = time_graph([lambda: st(emb, hid)]); tok_f = st(emb, hid)
        finally:
            MmaStep.lin = orig; st.fuse_act = False
        log(f'step M={M:2d}: triton {t_b * 1e3:.1f} us ({roof / t_b:.3f}) | mma {t_m * 1e3:.1f} us ({roof / t_m:.3f}) '
            f'| mma+fused silu {t_f * 1e3:.1f} us ({roof / t_f:.3f}) | roofline {roof * 1e3:.1f} us | '
            f'same tokens {int((tok_b == tok_m).sum())}/{M}, {int((tok_b == tok_f).sum())}/{M}')
        step_rows.append(dict(M=M, triton_us=t_b * 1e3, mma_us=t_m * 1e3, mma_fused_us=t_f * 1e3, roofline_us=roof * 1e3))
    json.dump(dict(bw=bw, rows=rows, steps=step_rows, fails=fails,
                   best={f'{k[0]},{k[1]}': v for k, v in best.items()},
                   torch=torch.__version__, device=torch.cuda.get_device_name()),
              open(os.path.join(a.out, 'mma_probe.json'), 'w'), indent=1)
    log(f'done in {time.time() - t0:.0f} s, {fails} failures')


if __name__ == '__main__':
    main()
