"""EXPERIMENT (issue 8), kept for the record, not part of the package: the dense Qwen3.5 draft step as ONE persistent
Triton launch with grid barriers between its 12 phases (norms, fc, qkv, attention glue, o_proj, gate_up + SiluAndMul,
down, head + argmax), and an L2 bulk prefetch of each program's next weights before it waits at a barrier.

Measured on an H200 (tools/gpu/NOTES.md, 2026-11-29): correct (same tokens as `DraftStep`, 50 CUDA-graph replays) but
SLOWER than the draft step as separate kernels: 265 us against 213 us at M = 1 (40 960-row head); the same code as 12
launches without barriers took 229 us, so each of the 11 barriers cost about 3 us, more than a kernel boundary inside
a CUDA graph; an L2 prefetch of 256 B .. 16 KiB per weight row did not change that (slower at M = 1 and 16).

Run on the device machine: `PYTHONPATH=. python3 tools/gpu/fused_step.py` (checks it against DraftStep, prints times);
under TRITON_INTERPRET=1 (CPU) it checks the 12-launch form at tiny shapes.
"""
import math, os, sys
import torch
import triton
import triton.language as tl
from mtp_lit._triton_kernels import _mainloop, _epilogue_scale
from mtp_lit.kernels import block_m
from mtp_lit.bench import DraftStep, _next_pow2

@triton.jit
def _l2_prefetch_rows(w_ptr, rows, k_lo, nbytes, stride_wn):
    """Ask the copy engine to bring `nbytes` of each weight row in `rows` (from column k_lo) into L2: one
    `cp.async.bulk.prefetch.L2.global` per row (PTX ISA 8.0, sm_90+); nbytes a multiple of 16, row starts 16-byte aligned.
    Nothing waits for it and no register holds the data: the loads that follow find the lines in L2 (or fetch them)."""
    addr = (w_ptr + rows.to(tl.int64) * stride_wn + k_lo).to(tl.int64)
    sz = (tl.zeros_like(rows) + nbytes).to(tl.int32)
    tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.gt.s32 p, $2, 0; @p cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }",
        "=r,l,r", [addr, sz], dtype=tl.int32, is_pure=False, pack=1)

@triton.jit
def _grid_sync(sync_ptr, P, SYNC: tl.constexpr):
    """Grid-wide barrier of a persistent kernel whose P programs are all resident (a cooperative launch): arrive on the
    count sync[0]; the last program to arrive resets it and bumps the generation sync[1]; the others spin (acquire) until
    the generation moves. Release/acquire at GPU scope make every write before the barrier visible after it. The
    generation only grows, so the buffer needs no reset between launches (or CUDA-graph replays)."""
    if SYNC:
        tl.debug_barrier()
        gen = tl.atomic_add(sync_ptr + 1, 0, sem='acquire', scope='gpu')
        arrived = tl.atomic_add(sync_ptr, 1, sem='acq_rel', scope='gpu')
        if arrived == P - 1:
            tl.atomic_xchg(sync_ptr, 0, sem='relaxed', scope='gpu')
            tl.atomic_add(sync_ptr + 1, 1, sem='release', scope='gpu')
        else:
            spins = 0
            while (tl.atomic_add(sync_ptr + 1, 0, sem='acquire', scope='gpu') == gen) & (spins < 1_000_000):
                tl.inline_asm_elementwise("nanosleep.u32 64; mov.u32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)
                spins += 1
        tl.debug_barrier()

@triton.jit
def _first_tile_prefetch(w_ptr, N: tl.constexpr, K: tl.constexpr, BN: tl.constexpr, SPLIT: tl.constexpr,
                         BK: tl.constexpr, P, PF: tl.constexpr):
    "Prefetch into L2 the first PF bytes of each weight row of this program's first tile of a linear phase."
    if PF > 0:
        NT: tl.constexpr = (N + BN - 1) // BN
        KS: tl.constexpr = ((K + SPLIT - 1) // SPLIT + BK - 1) // BK * BK
        t = tl.program_id(0)
        if t < NT * SPLIT:
            rn = (t % NT) * BN + tl.arange(0, BN)
            k_lo = (t // NT) * KS
            nb = tl.minimum(tl.minimum(KS, K - k_lo), PF) // 16 * 16
            _l2_prefetch_rows(w_ptr, tl.minimum(rn, N - 1), k_lo, nb, K)

@triton.jit
def _phase_linear(x_ptr, stride_x, w_ptr, s_ptr, o_ptr, stride_o, M, P,
                  N: tl.constexpr, K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                  SPLIT: tl.constexpr, MODE: tl.constexpr, DOT_F32: tl.constexpr, pi_ptr=None):
    """One linear of the draft step, W8A16 with per-channel scales, as a grid-stride loop over its NT x SPLIT tiles
    (tile t: weight rows (t % NT) BN.., K slice t // NT). MODE 0: o = y (bf16); 1: o += y (float32 atomics: the residual
    stream, so split-K is free); 2: rows of w come in (gate, up) pairs and o[:, n / 2] = silu(gate) * up (SiluAndMul in
    the epilogue); 3: the draft head: per tile, the largest bf16 logit of each token and its first index go to
    o[m, tile] (float32) and pi[m, tile] (int32)."""
    NT: tl.constexpr = (N + BN - 1) // BN
    KS: tl.constexpr = ((K + SPLIT - 1) // SPLIT + BK - 1) // BK * BK
    rm = tl.arange(0, BM)
    m_ok = rm < M
    for t in range(tl.program_id(0), NT * SPLIT, P):
        tn = t % NT
        k_lo = (t // NT) * KS
        rn = tn * BN + tl.arange(0, BN)
        n_ok = rn < N
        acc = _mainloop(x_ptr, w_ptr, s_ptr, rm, m_ok, rn, k_lo, tl.minimum(k_lo + KS, K), K, N,
                        stride_x, K, 1, 0, BM, BN, BK, 2, 128, 128, False, 2, False, DOT_F32, 0)
        acc = _epilogue_scale(acc, s_ptr, rn, N, 1, 2)
        if MODE == 0:
            tl.store(o_ptr + rm[:, None] * stride_o + rn[None, :], acc.to(o_ptr.dtype.element_ty),
                     mask=m_ok[:, None] & n_ok[None, :])
        elif MODE == 1:
            tl.atomic_add(o_ptr + rm[:, None] * stride_o + rn[None, :], acc, mask=m_ok[:, None] & n_ok[None, :],
                          sem='relaxed')
        elif MODE == 2:
            g, u = tl.split(tl.reshape(acc.to(tl.bfloat16).to(tl.float32), (BM, BN // 2, 2)))
            y = g / (1.0 + tl.exp(-g)) * u
            rh = tn * (BN // 2) + tl.arange(0, BN // 2)
            tl.store(o_ptr + rm[:, None] * stride_o + rh[None, :], y.to(o_ptr.dtype.element_ty),
                     mask=m_ok[:, None] & (rh < N // 2)[None, :])
        else:
            v = tl.where(n_ok[None, :], acc.to(tl.bfloat16).to(tl.float32), -float('inf'))
            vmax = tl.max(v, axis=1)
            first = tl.min(tl.where(v == vmax[:, None], rn[None, :], 2147483647), axis=1)
            tl.store(o_ptr + rm * NT + tn, vmax, mask=m_ok)
            tl.store(pi_ptr + rm * NT + tn, first, mask=m_ok)

@triton.jit
def _norm_rows(x_ptr, stride_x, w_ptr, o_ptr, stride_o, m, H: tl.constexpr, eps, HB: tl.constexpr):
    "o[m, :H] = rmsnorm(x[m, :H]) * w, float32 math, x read from L2 (`.cg`: it was written in this launch)."
    r = tl.arange(0, HB)
    ok = r < H
    x = tl.load(x_ptr + m * stride_x + r, mask=ok, other=0.0, cache_modifier='.cg').to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    w = tl.load(w_ptr + r, mask=ok, other=0.0).to(tl.float32)
    tl.store(o_ptr + m * stride_o + r, (x * rstd * w).to(o_ptr.dtype.element_ty), mask=ok)

@triton.jit
def _phase_norm(x_ptr, w_ptr, o_ptr, M, P, H: tl.constexpr, eps, HB: tl.constexpr):
    for m in range(tl.program_id(0), M, P):
        _norm_rows(x_ptr, H, w_ptr, o_ptr, H, m, H, eps, HB)

@triton.jit
def draft_step_kernel(emb_ptr, hid_ptr, enw_ptr, hnw_ptr, ln1_ptr, ln2_ptr, nw_ptr, qnw_ptr, knw_ptr,
                      wfc_ptr, sfc_ptr, wqkv_ptr, sqkv_ptr, wo_ptr, so_ptr, wgu_ptr, sgu_ptr, wd_ptr, sd_ptr, wh_ptr, sh_ptr,
                      res_ptr, xcat_ptr, xn1_ptr, qkv_ptr, ao_ptr, xn2_ptr, act_ptr, xn3_ptr, qn_ptr, kn_ptr,
                      pv_ptr, pi_ptr, ids_ptr, sync_ptr, M, eps, P,
                      H: tl.constexpr, HB: tl.constexpr, I: tl.constexpr, V: tl.constexpr,
                      NQ: tl.constexpr, NKV: tl.constexpr, D: tl.constexpr, GATE: tl.constexpr, BM: tl.constexpr,
                      FC_BN: tl.constexpr, FC_BK: tl.constexpr, FC_SP: tl.constexpr,
                      QKV_BN: tl.constexpr, QKV_BK: tl.constexpr, QKV_SP: tl.constexpr,
                      O_BN: tl.constexpr, O_BK: tl.constexpr, O_SP: tl.constexpr,
                      GU_BN: tl.constexpr, GU_BK: tl.constexpr, GU_SP: tl.constexpr,
                      DN_BN: tl.constexpr, DN_BK: tl.constexpr, DN_SP: tl.constexpr,
                      HD_BN: tl.constexpr, HD_BK: tl.constexpr, TB: tl.constexpr, PF: tl.constexpr, FIRST: tl.constexpr, LAST: tl.constexpr,
                      SYNC: tl.constexpr, DOT_F32: tl.constexpr):
    """One dense Qwen3.5 MTP draft step (`bench.DraftStep`, ctx = 0) in one persistent launch of P resident programs:
    12 phases separated by grid barriers (`_grid_sync`), each a grid-stride loop over its work.

    0 rmsnorm(emb) | rmsnorm(hid) -> xcat, zero the float32 residual res; 1 fc: res += xcat Wfc^T; 2 xn1 = norm(res);
    3 qkv = xn1 Wqkv^T; 4 attention glue of a token with no cached context (q/k norms -> qn, kn; ao = v sigmoid(gate));
    5 o_proj: res += ao Wo^T; 6 xn2 = norm(res); 7 act = SiluAndMul(xn2 Wgu^T) (Wgu rows interleaved gate, up);
    8 down: res += act Wd^T; 9 xn3 = norm(res); 10 head: per-tile largest logit; 11 ids = first index of the largest.
    FC_*..HD_*: BN, BK, split-K of each linear; TB: the next power of 2 of the head's tile count. A program that finishes a linear asks L2 for the first PF bytes of each
    weight row of its first tile of the next linear before it waits at the barrier, so the weight stream goes on across
    the barriers and the small phases in between. FIRST/LAST run only phases FIRST..LAST (SYNC=False: one launch per
    phase, as the CPU interpreter needs, which runs programs one after another)."""
    pid = tl.program_id(0)
    if FIRST == 0:
        _first_tile_prefetch(wfc_ptr, H, 2 * H, FC_BN, FC_SP, FC_BK, P, PF)
        for it in range(pid, 3 * M, P):
            m = it % M
            j = it // M
            if j == 0:
                _norm_rows(emb_ptr, H, enw_ptr, xcat_ptr, 2 * H, m, H, eps, HB)
            elif j == 1:
                _norm_rows(hid_ptr, H, hnw_ptr, xcat_ptr + H, 2 * H, m, H, eps, HB)
            else:
                r = tl.arange(0, HB)
                tl.store(res_ptr + m * H + r, tl.zeros((HB,), tl.float32), mask=r < H)
        if LAST > 0:
            _grid_sync(sync_ptr, P, SYNC)
    if FIRST <= 1 and LAST >= 1:
        _phase_linear(xcat_ptr, 2 * H, wfc_ptr, sfc_ptr, res_ptr, H, M, P, H, 2 * H, BM, FC_BN, FC_BK, FC_SP, 1, DOT_F32)
        _first_tile_prefetch(wqkv_ptr, NQ * D * (1 + GATE) + 2 * NKV * D, H, QKV_BN, QKV_SP, QKV_BK, P, PF)
        if LAST > 1:
            _grid_sync(sync_ptr, P, SYNC)
    if FIRST <= 2 and LAST >= 2:
        _phase_norm(res_ptr, ln1_ptr, xn1_ptr, M, P, H, eps, HB)
        if LAST > 2:
            _grid_sync(sync_ptr, P, SYNC)
    NQKV: tl.constexpr = NQ * D * (1 + GATE) + 2 * NKV * D
    if FIRST <= 3 and LAST >= 3:
        _phase_linear(xn1_ptr, H, wqkv_ptr, sqkv_ptr, qkv_ptr, NQKV, M, P, NQKV, H, BM, QKV_BN, QKV_BK, QKV_SP, 0, DOT_F32)
        _first_tile_prefetch(wo_ptr, H, NQ * D, O_BN, O_SP, O_BK, P, PF)
        if LAST > 3:
            _grid_sync(sync_ptr, P, SYNC)
    if FIRST <= 4 and LAST >= 4:
        QW: tl.constexpr = D * (1 + GATE)
        d = tl.arange(0, D)
        for it in range(pid, M * (NQ + NKV), P):
            m = it // (NQ + NKV)
            h = it % (NQ + NKV)
            row = qkv_ptr + m * NQKV
            if h < NQ:
                q = tl.load(row + h * QW + d, cache_modifier='.cg').to(tl.float32)
                qn = q / tl.sqrt(tl.sum(q * q, axis=0) / D + eps) * tl.load(qnw_ptr + d).to(tl.float32)
                tl.store(qn_ptr + (m * NQ + h) * D + d, qn.to(qn_ptr.dtype.element_ty))
                v = tl.load(row + NQ * QW + NKV * D + (h // (NQ // NKV)) * D + d, cache_modifier='.cg').to(tl.float32)
                if GATE:
                    g = tl.load(row + h * QW + D + d, cache_modifier='.cg').to(tl.float32)
                    v = v / (1.0 + tl.exp(-g))
                tl.store(ao_ptr + (m * NQ + h) * D + d, v.to(ao_ptr.dtype.element_ty))
            else:
                k = tl.load(row + NQ * QW + (h - NQ) * D + d, cache_modifier='.cg').to(tl.float32)
                kn = k / tl.sqrt(tl.sum(k * k, axis=0) / D + eps) * tl.load(knw_ptr + d).to(tl.float32)
                tl.store(kn_ptr + (m * NKV + h - NQ) * D + d, kn.to(kn_ptr.dtype.element_ty))
        if LAST > 4:
            _grid_sync(sync_ptr, P, SYNC)
    if FIRST <= 5 and LAST >= 5:
        _phase_linear(ao_ptr, NQ * D, wo_ptr, so_ptr, res_ptr, H, M, P, H, NQ * D, BM, O_BN, O_BK, O_SP, 1, DOT_F32)
        _first_tile_prefetch(wgu_ptr, 2 * I, H, GU_BN, GU_SP, GU_BK, P, PF)
        if LAST > 5:
            _grid_sync(sync_ptr, P, SYNC)
    if FIRST <= 6 and LAST >= 6:
        _phase_norm(res_ptr, ln2_ptr, xn2_ptr, M, P, H, eps, HB)
        if LAST > 6:
            _grid_sync(sync_ptr, P, SYNC)
    if FIRST <= 7 and LAST >= 7:
        _phase_linear(xn2_ptr, H, wgu_ptr, sgu_ptr, act_ptr, I, M, P, 2 * I, H, BM, GU_BN, GU_BK, GU_SP, 2, DOT_F32)
        _first_tile_prefetch(wd_ptr, H, I, DN_BN, DN_SP, DN_BK, P, PF)
        if LAST > 7:
            _grid_sync(sync_ptr, P, SYNC)
    if FIRST <= 8 and LAST >= 8:
        _phase_linear(act_ptr, I, wd_ptr, sd_ptr, res_ptr, H, M, P, H, I, BM, DN_BN, DN_BK, DN_SP, 1, DOT_F32)
        _first_tile_prefetch(wh_ptr, V, H, HD_BN, 1, HD_BK, P, PF)
        if LAST > 8:
            _grid_sync(sync_ptr, P, SYNC)
    if FIRST <= 9 and LAST >= 9:
        _phase_norm(res_ptr, nw_ptr, xn3_ptr, M, P, H, eps, HB)
        if LAST > 9:
            _grid_sync(sync_ptr, P, SYNC)
    NTH: tl.constexpr = (V + HD_BN - 1) // HD_BN
    if FIRST <= 10 and LAST >= 10:
        _phase_linear(xn3_ptr, H, wh_ptr, sh_ptr, pv_ptr, 0, M, P, V, H, BM, HD_BN, HD_BK, 1, 3, DOT_F32, pi_ptr)
        if LAST > 10:
            _grid_sync(sync_ptr, P, SYNC)
    if LAST >= 11:
        r = tl.arange(0, TB)
        for m in range(pid, M, P):
            v = tl.load(pv_ptr + m * NTH + r, mask=r < NTH, other=-float('inf'), cache_modifier='.cg')
            ix = tl.load(pi_ptr + m * NTH + r, mask=r < NTH, other=2147483647, cache_modifier='.cg')
            best = tl.max(v, axis=0)
            tl.store(ids_ptr + m, tl.min(tl.where(v == best, ix, 2147483647), axis=0).to(tl.int64))


def step_tiles(N, K, P, accumulate, bandwidth=4.2e12, tile_cost=0.5e-6, bns=(64,), bks=(256,), max_split=16):
    """(BN, BK, SPLIT) for one FP8 linear [N, K] of `FusedDraftStep`, whose P programs take its NT x SPLIT tiles in a
    grid-stride loop: the choice with the least modelled phase time ceil(tiles / P) * (tile bytes / (bandwidth / P) +
    tile_cost), tile_cost (s) standing for each tile's pipeline fill. Split-K only when `accumulate` (the output is
    the float32 residual stream, added into with atomics); every split has >= 2 BK steps and no empty slice."""
    best = None
    for bn in bns:
        nt = math.ceil(N / bn)
        for bk in bks:
            for sp in (range(1, max_split + 1) if accumulate else (1,)):
                ks = math.ceil(math.ceil(K / sp) / bk) * bk
                if math.ceil(K / ks) != sp or (sp > 1 and ks < 2 * bk): continue
                tiles = nt * sp
                t = math.ceil(tiles / P) * (bn * min(ks, K) / (bandwidth / P) + tile_cost)
                if best is None or t < best[0] - 1e-9: best = (t, (bn, bk, sp))
    return best[1]

class FusedDraftStep:
    """The dense draft step of a `DraftStep(cfg, 'fp8-mtp_lit')` (its weights and norms) in ONE persistent Triton launch,
    `draft_step_kernel` (above): 12 phases (norms, fc, qkv, attention glue, o_proj, gate_up + SiluAndMul,
    down, head + argmax) separated by grid barriers, every linear spread over all programs. A draft step of separate
    kernels pays each kernel's ramp-up and tail (about 6.7 us per linear on an H200, `14_bench`); here the weight stream
    only pauses at the barriers, and each program asks L2 for its next weights before it waits at one (`prefetch`
    bytes per weight row). The draft token is the first index of the largest bf16 logit, as `torch.argmax` of the head's
    bf16 output: the head's logits are reduced per tile and never written.

    programs: resident programs (default 2 per SM; launched as a cooperative grid, so the barrier cannot deadlock).
    sync=False runs the 12 phases as 12 launches of the same kernel (no barrier): the CPU interpreter's way
    (TRITON_INTERPRET=1, programs run one after another) and a same-code check of the barriers. Dense MTP layers only
    (no routed experts), ctx = 0 as `DraftStep`. Raises ValueError for other variants, MoE configs or M > 16."""
    PHASES = 12

    def __init__(self, step, programs=None, prefetch=4096, sync=True, num_stages=4, num_warps=4):
        if step.variant != 'fp8-mtp_lit': raise ValueError(f"FusedDraftStep needs a 'fp8-mtp_lit' DraftStep, got {step.variant!r}")
        cfg = step.cfg
        if cfg.get('moe'): raise ValueError("FusedDraftStep covers dense MTP layers; this config has routed experts ('moe')")
        if sync and os.environ.get('TRITON_INTERPRET') == '1':
            raise ValueError("sync=True needs all programs resident at once; the interpreter runs them one by one: use sync=False")
        self.step, self.cfg, self.sync, self.num_stages, self.num_warps = step, cfg, sync, num_stages, num_warps
        self.interp = os.environ.get('TRITON_INTERPRET') == '1'
        dev = step.w['fc'][0].device
        H, D, I = cfg['hidden_size'], cfg['head_dim'], cfg['intermediate_size']
        self.dims = dict(H=H, D=D, I=I, NQ=cfg['num_attention_heads'], NKV=cfg['num_key_value_heads'],
                         GATE=bool(cfg['attn_output_gate']), V=step.head_rows)
        w = {n: (q.contiguous(), s.reshape(-1).float().contiguous()) for n, (q, s) in step.w.items()}
        q, s = w['gate_up_proj']  # rows (gate_0, up_0, gate_1, up_1, ...): a tile holds both halves of its outputs
        w['gate_up_proj'] = (q.view(2, I, H).transpose(0, 1).reshape(2 * I, H).contiguous(), s.view(2, I).t().reshape(-1).contiguous())
        self.w = w
        self.P = programs or (2 * torch.cuda.get_device_properties(dev).multi_processor_count if dev.type == 'cuda' else 4)
        self.prefetch = 0 if self.interp or dev.type != 'cuda' else prefetch
        nqkv = w['qkv_proj'][0].shape[0]
        shp = dict(FC=(H, 2 * H, True), QKV=(nqkv, H, False), O=(H, w['o_proj'][0].shape[1], True), GU=(2 * I, H, False),
                   DN=(H, I, True), HD=(step.head_rows, H, False))
        self.tiles = {k: step_tiles(N, K_, self.P, acc) for k, (N, K_, acc) in shp.items()}
        self.sync_buf = torch.zeros(2, dtype=torch.int32, device=dev)
        self._bufs = {}

    def _buffers(self, M):
        if M not in self._bufs:
            d, dev = self.dims, self.sync_buf.device
            H, nq, nkv, D = d['H'], d['NQ'], d['NKV'], d['D']
            e = lambda *s, dt=torch.bfloat16: torch.empty(*s, device=dev, dtype=dt)
            nth = math.ceil(d['V'] / self.tiles['HD'][0])
            self._bufs[M] = dict(res=e(M, H, dt=torch.float32), xcat=e(M, 2 * H), xn1=e(M, H),
                                 qkv=e(M, self.w['qkv_proj'][0].shape[0]), ao=e(M, nq * D), xn2=e(M, H), act=e(M, d['I']),
                                 xn3=e(M, H), qn=e(M, nq, D), kn=e(M, nkv, D), pv=e(M, nth, dt=torch.float32),
                                 pi=e(M, nth, dt=torch.int32), ids=e(M, dt=torch.int64))
        return self._bufs[M]

    def run(self, emb, hid):
        "Run the step on emb, hid [M, H] bf16; returns the buffers dict (ids [M] int64, xn3 = the final normed hidden, ...)."
        M, H = emb.shape
        if M > 16: raise ValueError(f"FusedDraftStep runs M <= 16 tokens per launch (its programs are sized for 16-row "
                                    f"activation tiles), got M={M}")
        if hid.shape != emb.shape: raise ValueError(f"emb {tuple(emb.shape)} and hid {tuple(hid.shape)} differ")
        b, p, d, t, w = self._buffers(M), self.step.p, self.dims, self.tiles, self.w
        args = [emb.contiguous(), hid.contiguous(), p['enorm'], p['hnorm'], p['ln1'], p['ln2'], p['norm'], p['qn'], p['kn'],
                *w['fc'], *w['qkv_proj'], *w['o_proj'], *w['gate_up_proj'], *w['down_proj'], *w['head'],
                b['res'], b['xcat'], b['xn1'], b['qkv'], b['ao'], b['xn2'], b['act'], b['xn3'], b['qn'], b['kn'],
                b['pv'], b['pi'], b['ids'], self.sync_buf, M, self.cfg['rms_norm_eps'], self.P]
        kw = dict(H=H, HB=_next_pow2(H), I=d['I'], V=d['V'], NQ=d['NQ'], NKV=d['NKV'], D=d['D'], GATE=d['GATE'], BM=block_m(M),
                  TB=_next_pow2(b['pv'].shape[1]), PF=self.prefetch, DOT_F32=self.interp,
                  num_warps=self.num_warps, num_stages=self.num_stages)
        for k, (bn, bk, sp) in t.items():
            kw.update({f'{k}_BN': bn, f'{k}_BK': bk})
            if k != 'HD': kw[f'{k}_SP'] = sp
        if self.sync:
            draft_step_kernel[(self.P,)](*args, FIRST=0, LAST=self.PHASES - 1, SYNC=True, launch_cooperative_grid=True, **kw)
        else:
            for ph in range(self.PHASES):
                draft_step_kernel[(self.P,)](*args, FIRST=ph, LAST=ph, SYNC=False, **kw)
        return b

    def hidden(self, emb, hid):
        "The final normed hidden state [M, H] bf16 (as `DraftStep.hidden`)."
        return self.run(emb, hid)['xn3']

    def __call__(self, emb, hid):
        "Draft token ids [M] int64."
        return self.run(emb, hid)['ids']


def _main():
    from mtp_lit.bench import tiny_shapes, load_shapes
    from mtp_lit.kernels import time_graph
    interp = os.environ.get('TRITON_INTERPRET') == '1'
    cfg, head = (tiny_shapes()['Qwen3.5-27B'], None) if interp else (load_shapes()['Qwen3.5-27B'], 40960)
    dev = 'cpu' if interp else 'cuda'
    for M in ((3,) if interp else (1, 4, 16)):
        g = torch.Generator(device=dev).manual_seed(M)
        emb = torch.randn(M, cfg['hidden_size'], device=dev, generator=g).to(torch.bfloat16)
        hid = (4 * torch.randn(M, cfg['hidden_size'], device=dev, generator=g)).to(torch.bfloat16)
        s = DraftStep(cfg, 'fp8-mtp_lit', head, dev, seed=0, backend='torch' if interp else 'auto')
        h0, ids0 = s.hidden(emb, hid).double(), s(emb, hid)
        for sync in ((False,) if interp else (True, False)):
            f = FusedDraftStep(s, sync=sync, prefetch=0)
            b = f.run(emb, hid)
            err = ((b['xn3'].double() - h0).norm() / h0.norm()).item()
            line = f'M={M} sync={sync}: ids equal {torch.equal(b["ids"], ids0)}, hidden rel err {err:.1e}'
            if not interp:
                line += f', {time_graph([lambda: f.run(emb, hid)]) * 1e3:.1f} us vs DraftStep {time_graph([lambda: s(emb, hid)]) * 1e3:.1f} us'
            print(line, flush=True)


if __name__ == '__main__':
    _main()
