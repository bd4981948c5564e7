"""Prototype (issue 8, round 4): a register-fed FP8 linear for decode sizes (M <= 16) in CUDA C++, compiled at run time
with NVRTC (torch's own copy) and launched through the driver API, PDL included.

Design (Marlin-style): the weight is packed once so that each lane's 16-byte load *is* its mma.sync m16n8k32 e4m3 A
fragment; a warp streams its 16-row tiles as one sequence of 512-byte steps through a cp.async ring of U stages in
shared memory (the first version, in results/ncu_mma_summary.txt, loaded into a ring of U registers); the activations
are quantised to e4m3 once per CTA (per token over the CTA's K slice) into shared memory as B fragments (MMA 1), or
kept bf16 with the weights widened by the bit trick for bf16 m16n8k16 (MMA 2); MMA 0 and PRO 0 are timing probes.
Weights fill the MMA's M side (16 rows), tokens its N side (8 per n8 tile). Slower than the Triton kernel everywhere
(NOTES.md, round 4): kept as the experiment."""
import ctypes, functools, math
import torch

SRC = r'''
typedef unsigned int u32;
typedef unsigned short u16;
struct __align__(16) U4 { u32 x, y, z, w; };
struct __align__(8) U2 { u32 x, y; };
struct __align__(8) H4 { u16 a, b, c, d; };

#define MIN_SCALE (1.0f / (448.0f * 512.0f))

__device__ __forceinline__ U4 ldg_stream(const U4* p) {
  U4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}

__device__ __forceinline__ void mma_e4m3(float* c, const U4& a, const U2& b) {
  asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b.x), "r"(b.y));
}

__device__ __forceinline__ void mma_bf16(float* c, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// 4 e4m3 bytes [b0 b1 b2 b3] -> bf16x2 (b0, b1) and (b2, b3), exact (normals, subnormals, zero): each byte into the high
// byte of a 16-bit half, sign kept at bit 15, the 7 exponent+mantissa bits moved to bits 4..10, one bf16x2 multiply by
// 2^120 rebiases the exponent (7 -> 127). Integer ops only: no F2F conversion unit.
__device__ __forceinline__ void e4m3x4_to_bf16(u32 w, u32& lo, u32& hi) {
  asm("{\n.reg .b32 t0, t1, m0, m1, k;\n"
      "prmt.b32 t0, %2, 0, 0x1404;\n prmt.b32 t1, %2, 0, 0x3424;\n"
      "and.b32 m0, t0, 0x7F007F00;\n and.b32 m1, t1, 0x7F007F00;\n"
      "shr.b32 m0, m0, 4;\n shr.b32 m1, m1, 4;\n"
      "lop3.b32 t0, t0, m0, 0x80008000, 0xEC;\n lop3.b32 t1, t1, m1, 0x80008000, 0xEC;\n"
      "mov.b32 k, 0x7B807B80;\n"
      "mul.rn.bf16x2 %0, t0, k;\n mul.rn.bf16x2 %1, t1, k;\n}"
      : "=r"(lo), "=r"(hi) : "r"(w));
}

__device__ __forceinline__ u32 pack2_bf16(float a, float b) {
  u32 r; asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(b), "f"(a)); return r;
}

__device__ __forceinline__ u32 pack4_e4m3(float v0, float v1, float v2, float v3) {
  u16 lo, hi;  // cvt packs its first operand into the upper byte
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(lo) : "f"(v1), "f"(v0));
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(hi) : "f"(v3), "f"(v2));
  return (u32)lo | ((u32)hi << 16);
}

__device__ __forceinline__ u16 to_bf16(float v) { u16 h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v)); return h; }
__device__ __forceinline__ float bf16f(u16 h) { return __uint_as_float(((u32)h) << 16); }
__device__ __forceinline__ float silu(float g) { return g / (1.0f + __expf(-g)); }

// x[m, k..k+3] as float (XF32: float32 rows, else bf16); ACT 1: silu(x[m, k..]) * x[m, K + k..] (SiluAndMul)
template <int XF32, int ACT>
__device__ __forceinline__ void load4(const void* xv, int m, int k, int K, int stride_xm, float* v) {
  if (XF32) {
    const float* x = (const float*)xv + (size_t)m * stride_xm;
    float4 a = *(const float4*)(x + k);
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
    if (ACT) {
      float4 u = *(const float4*)(x + K + k);
      v[0] = silu(v[0]) * u.x; v[1] = silu(v[1]) * u.y; v[2] = silu(v[2]) * u.z; v[3] = silu(v[3]) * u.w;
    }
  } else {
    const u16* x = (const u16*)xv + (size_t)m * stride_xm;
    H4 a = *(const H4*)(x + k);
    v[0] = bf16f(a.a); v[1] = bf16f(a.b); v[2] = bf16f(a.c); v[3] = bf16f(a.d);
    if (ACT) {
      H4 u = *(const H4*)(x + K + k);
      v[0] = silu(v[0]) * bf16f(u.a); v[1] = silu(v[1]) * bf16f(u.b);
      v[2] = silu(v[2]) * bf16f(u.c); v[3] = silu(v[3]) * bf16f(u.d);
    }
  }
}

__device__ __forceinline__ void cp_async16(void* smem_ptr, const void* gptr) {
  const u32 sa = (u32)__cvta_generic_to_shared(smem_ptr);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(sa), "l"(gptr));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;"); }
template <int N> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N)); }

// y[M, N] = act(x)[M, K] @ (scale * W[N, K])^T, M <= 8 * MT. Persistent over row tiles: grid = (P, cdiv(K, k_split)),
// block = 32 * WN. CTA (b, z) owns the K slice [z k_split, ...) and the row tiles (b + i P) WN + wn of its warps; each warp
// streams its tiles' weights as one sequence of k32 steps through a cp.async ring of U stages (U - 1 in flight) in
// shared memory, its own 512 B per stage (no barrier: a lane only reads back what it copied).
// wp: W packed by pack_mma ([N/16, K/32, 32 lanes, 16 B]); ws: float32 scales (SM 1 per-tensor [1], 2 per-channel [N],
// 3 block [ceil(N/128), ceil(K/128)] with row stride stride_sn).
// OUT 0: out bf16 [M, N] (one K slice); 1: out float32, += with atomics; 2: the draft head's argmax partials:
// pv[m, tile] (largest logit, rounded to bf16) and pi[m, tile] (its first row), tile = 16 rows (T = N / 16).
template <int MT, int WN, int U, int SM, int OUT, int XF32, int ACT, int PDL, int EARLY, int PRO, int MMA, int LAYOUT>
__global__ void __launch_bounds__(32 * WN)
fp8_mma_linear(const U4* __restrict__ wp, const float* __restrict__ ws, const void* __restrict__ xv,
               void* __restrict__ out, float* __restrict__ pv, int* __restrict__ pi,
               int M, int N, int K, int k_split, int stride_xm, int stride_om, int stride_sn) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int tid = threadIdx.x, lane = tid & 31, wn = tid >> 5;
  const int k0 = blockIdx.y * k_split;
  const int k1 = min(k0 + k_split, K);
  const int S = (k1 - k0) >> 5;
  const int KT = K >> 5, NT = N >> 4;
  const int rt0 = blockIdx.x * WN + wn, rstride = gridDim.x * WN;
  const int ntiles = rt0 < NT ? (NT - 1 - rt0) / rstride + 1 : 0;
  const int total = ntiles * S;
  constexpr int XB = MMA == 2 ? 512 : 256;             // bytes of one (step, n8 tile) of B fragments
  U2* xf = (U2*)smem;                                   // [S][MT][32] B fragments (MMA 2: U4, 8 bf16 per lane)
  float* xsc = (float*)(smem + (size_t)S * MT * XB);    // [8 * MT] activation scales
  int* amax = (int*)(xsc + 8 * MT);                     // [8 * MT]
  U4* ring = (U4*)(smem + (size_t)S * MT * XB + 64 * MT) + wn * U * 32 + lane;  // this lane's slot of stage 0

  // producer state: the next step to copy (tile pt, step ps)
  int pj = 0, pt = 0, ps = 0;
  auto produce = [&]() {
    if (pj < total) {
      const U4* src = LAYOUT ? wp + ((size_t)((k0 >> 5) + ps) * NT + rt0 + pt * rstride) * 32 + lane   // step-major
                             : wp + ((size_t)(rt0 + pt * rstride) * KT + (k0 >> 5) + ps) * 32 + lane;
      cp_async16(ring + (pj % U) * 32, src);
      if (++ps == S) { ps = 0; ++pt; }
    }
    ++pj;
    cp_commit();
  };
  if (EARLY) {
#pragma unroll
    for (int u = 0; u < U - 1; ++u) produce();
  }
  if (PDL) asm volatile("griddepcontrol.wait;" ::: "memory");
  if (!EARLY) {
#pragma unroll
    for (int u = 0; u < U - 1; ++u) produce();
  }
  if (PDL) asm volatile("griddepcontrol.launch_dependents;");

  // activation quantisation: scale per token over this CTA's K slice = max(amax / 448, MIN_SCALE) (vLLM's dynamic scale)
  const int Q = (k1 - k0) >> 2;  // quads of 4 columns
  if (PRO && MMA == 2) {  // W8A16: x as bf16 B fragments of m16n8k16, no scale
    for (int i = tid; i < 8 * MT; i += blockDim.x) xsc[i] = 1.0f;
    const int items = S * MT * 32;
#pragma unroll 4
    for (int idx = tid; idx < items; idx += blockDim.x) {
      const int l = idx & 31, t = (idx >> 5) % MT, s = idx / (32 * MT);
      const int n = t * 8 + (l >> 2);
      U4 word = {0u, 0u, 0u, 0u};
      if (n < M) {
        float v[4], u[4];
        load4<XF32, ACT>(xv, n, k0 + s * 32 + (l & 3) * 4, K, stride_xm, v);
        load4<XF32, ACT>(xv, n, k0 + s * 32 + 16 + (l & 3) * 4, K, stride_xm, u);
        word.x = pack2_bf16(v[0], v[1]); word.y = pack2_bf16(v[2], v[3]);
        word.z = pack2_bf16(u[0], u[1]); word.w = pack2_bf16(u[2], u[3]);
      }
      ((U4*)xf)[idx] = word;
    }
    __syncthreads();
  } else if (PRO) {
    for (int i = tid; i < 8 * MT; i += blockDim.x) amax[i] = 0;
    __syncthreads();
    int cur = -1; float am = 0.f;
#pragma unroll 4
    for (int idx = tid; idx < M * Q; idx += blockDim.x) {
      const int m = idx / Q, q = idx - m * Q;
      float v[4];
      load4<XF32, ACT>(xv, m, k0 + 4 * q, K, stride_xm, v);
      const float a4 = fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3])));
      if (m != cur) { if (cur >= 0) atomicMax(&amax[cur], __float_as_int(am)); cur = m; am = 0.f; }
      am = fmaxf(am, a4);
    }
    if (cur >= 0) atomicMax(&amax[cur], __float_as_int(am));
    __syncthreads();
    for (int i = tid; i < 8 * MT; i += blockDim.x) xsc[i] = fmaxf(__int_as_float(amax[i]) / 448.0f, MIN_SCALE);
    __syncthreads();
    const int items = S * MT * 64;
#pragma unroll 4
    for (int idx = tid; idx < items; idx += blockDim.x) {
      const int j = idx & 1, l = (idx >> 1) & 31, t = (idx >> 6) % MT, s = idx / (64 * MT);
      const int n = t * 8 + (l >> 2);
      u32 word = 0;
      if (n < M) {
        float v[4];
        load4<XF32, ACT>(xv, n, k0 + s * 32 + (l & 3) * 4 + j * 16, K, stride_xm, v);
        const float sc = xsc[n];
        word = pack4_e4m3(v[0] / sc, v[1] / sc, v[2] / sc, v[3] / sc);
      }
      ((u32*)xf)[idx] = word;
    }
    __syncthreads();
  } else {  // timing probe only: no activation pass (x taken as its fragments are left in shared memory, scale 1)
    for (int i = tid; i < 8 * MT; i += blockDim.x) xsc[i] = 1.0f;
    __syncthreads();
  }

  const int g = lane >> 2, tg = lane & 3;
  float acc[MT][4], tmp[MT][4];
#pragma unroll
  for (int t = 0; t < MT; ++t)
#pragma unroll
    for (int c = 0; c < 4; ++c) { acc[t][c] = 0.f; tmp[t][c] = 0.f; }
  int tile = 0, s = 0;
  for (int j = 0; j < total; ++j) {
    produce();                 // step j + U - 1 into the stage that step j - 1 used
    cp_wait<U - 1>();          // step j has landed
    const U4 cur = ring[(j % U) * 32];
    if (MMA == 1) {
      const U2* xb = xf + (size_t)s * MT * 32 + lane;
#pragma unroll
      for (int t = 0; t < MT; ++t) mma_e4m3(tmp[t], cur, xb[t * 32]);
    } else if (MMA == 2) {
      const U4* xb = (const U4*)xf + (size_t)s * MT * 32 + lane;
      u32 l0, h0, l1, h1, l2, h2, l3, h3;
      e4m3x4_to_bf16(cur.x, l0, h0); e4m3x4_to_bf16(cur.y, l1, h1);
      e4m3x4_to_bf16(cur.z, l2, h2); e4m3x4_to_bf16(cur.w, l3, h3);
#pragma unroll
      for (int t = 0; t < MT; ++t) {
        const U4 b = xb[t * 32];
        mma_bf16(tmp[t], l0, l1, h0, h1, b.x, b.y);
        mma_bf16(tmp[t], l2, l3, h2, h3, b.z, b.w);
      }
    } else {  // timing probe only: the weight bytes folded into the accumulator, no MMA
      tmp[0][0] += __int_as_float((cur.x ^ cur.y ^ cur.z ^ cur.w) & 0x007FFFFF);
    }
    const int rt = rt0 + tile * rstride;
    const int kend = k0 + (s + 1) * 32;
    const bool last = s == S - 1;
    if ((kend & 127) == 0 || last) {  // promote to the float32 accumulator every 128 columns (fp8 MMA sums are ~14-bit)
      const float bs = SM == 3 ? ws[(rt >> 3) * stride_sn + ((kend - 1) >> 7)] : 1.0f;
#pragma unroll
      for (int t = 0; t < MT; ++t)
#pragma unroll
        for (int c = 0; c < 4; ++c) { acc[t][c] += tmp[t][c] * bs; tmp[t][c] = 0.f; }
    }
    if (last) {  // epilogue of row tile rt
      const int r0 = rt * 16 + g, r1 = r0 + 8;
      float s0 = 1.f, s1 = 1.f;
      if (SM == 1) { s0 = ws[0]; s1 = s0; }
      if (SM == 2) { s0 = ws[(size_t)r0 * stride_sn]; s1 = ws[(size_t)r1 * stride_sn]; }
#pragma unroll
      for (int t = 0; t < MT; ++t) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int n = t * 8 + tg * 2 + e;
          const float xs = n < M ? xsc[n] : 0.f;
          const float v0 = acc[t][e] * s0 * xs, v1 = acc[t][2 + e] * s1 * xs;
          if (OUT == 0) {
            if (n < M) {
              ((u16*)out)[(size_t)n * stride_om + r0] = to_bf16(v0);
              ((u16*)out)[(size_t)n * stride_om + r1] = to_bf16(v1);
            }
          } else if (OUT == 1) {
            if (n < M) {
              atomicAdd((float*)out + (size_t)n * stride_om + r0, v0);
              atomicAdd((float*)out + (size_t)n * stride_om + r1, v1);
            }
          } else {
            float b0 = bf16f(to_bf16(v0)), b1 = bf16f(to_bf16(v1));
            if (b0 != b0) b0 = __int_as_float(0x7f800000);  // NaN counts as +inf (torch.argmax)
            if (b1 != b1) b1 = __int_as_float(0x7f800000);
            float bv = b0; int bi = r0;
            if (b1 > b0) { bv = b1; bi = r1; }
#pragma unroll
            for (int o = 4; o < 32; o <<= 1) {
              const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
              const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
              if (ov > bv || (ov == bv && oi < bi)) { bv = ov; bi = oi; }
            }
            if (g == 0 && n < M) {
              pv[(size_t)n * NT + rt] = bv;
              pi[(size_t)n * NT + rt] = bi;
            }
          }
          acc[t][e] = 0.f; acc[t][2 + e] = 0.f;
        }
      }
      s = 0; ++tile;
    } else {
      ++s;
    }
  }
  cp_wait<0>();
}
'''


def pack_mma(qweight, layout=0):
    """qweight [N, K] float8_e4m3fn -> [N/16, K/32, 32, 16] uint8: lane L's 16 bytes of row tile r, k32 step s are its
    m16n8k32 A fragment (PTX ISA, mma.m16n8k32 .e4m3 A layout): rows g = L // 4 and g + 8, columns 4 (L % 4) + 0..3
    and 16 + 4 (L % 4) + 0..3, in register order (g, c), (g + 8, c), (g, c + 16), (g + 8, c + 16)."""
    N, K = qweight.shape
    if N % 16 or K % 32: raise ValueError(f"pack_mma needs N % 16 == 0 and K % 32 == 0, got qweight {tuple(qweight.shape)}")
    w = qweight.view(torch.uint8).reshape(N // 16, 2, 8, K // 32, 2, 4, 4)  # [rt, h, g, s, kh, t, b]
    p = w.permute(0, 3, 2, 5, 4, 1, 6).contiguous().reshape(N // 16, K // 32, 32, 16)
    if layout: p = p.transpose(0, 1).contiguous()  # step-major [K/32, N/16, 32, 16]: warps at the same step read adjacent bytes
    return p


@functools.cache
def _libcuda():
    lib = ctypes.CDLL('libcuda.so.1')
    lib.cuModuleLoadData.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
    lib.cuModuleGetFunction.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_char_p]
    lib.cuFuncSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    return lib


def _check(r, what):
    if r != 0: raise RuntimeError(f"{what} failed with CUDA driver error {r}")


class _LaunchAttr(ctypes.Structure):
    _fields_ = [('id', ctypes.c_int), ('pad', ctypes.c_int), ('value', ctypes.c_int), ('rest', ctypes.c_int * 15)]


class _LaunchConfig(ctypes.Structure):
    _fields_ = [('gx', ctypes.c_uint), ('gy', ctypes.c_uint), ('gz', ctypes.c_uint),
                ('bx', ctypes.c_uint), ('by', ctypes.c_uint), ('bz', ctypes.c_uint),
                ('smem', ctypes.c_uint), ('stream', ctypes.c_void_p),
                ('attrs', ctypes.POINTER(_LaunchAttr)), ('nattrs', ctypes.c_uint)]


@functools.cache
def cubin(MT, WN, U, SM, OUT, XF32, ACT, PDL, EARLY, PRO=1, MMA=1, LAYOUT=0):
    "NVRTC (torch's libnvrtc) -> (sm_90 cubin, mangled name) of one instantiation; thread-safe, needs no CUDA context."
    from torch.cuda._utils import _nvrtc_compile
    name = f'fp8_mma_linear<{MT},{WN},{U},{SM},{OUT},{XF32},{ACT},{PDL},{EARLY},{PRO},{MMA},{LAYOUT}>'
    return _nvrtc_compile(SRC, name, '90', nvcc_options=['-std=c++17'])


@functools.cache
def kernel(*key):
    "The loaded function handle (CUfunction) of one instantiation (in the calling thread's current CUDA context)."
    code, mangled = cubin(*key)
    torch.cuda.init(); torch.zeros(1, device='cuda')  # make the primary context current
    lib = _libcuda()
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    buf = ctypes.create_string_buffer(code)
    _check(lib.cuModuleLoadData(ctypes.byref(mod), buf), 'cuModuleLoadData')
    _check(lib.cuModuleGetFunction(ctypes.byref(fn), mod, mangled.encode()), 'cuModuleGetFunction')
    _check(lib.cuFuncSetAttribute(fn, 8, 200 * 1024), 'cuFuncSetAttribute(max dynamic smem)')
    _KEEP.extend([buf, mod])
    return fn


_KEEP = []


def smem_bytes(K, k_split, MT, WN, U, mma=1):
    S = min(k_split, K) // 32
    return S * MT * (512 if mma == 2 else 256) + 64 * MT + WN * U * 512


def launch(fn, grid, block, smem, args, pdl=False):
    "cuLaunchKernelEx on torch's current stream; args: tensors (pointers) and ints; pdl: programmatic stream serialization."
    lib = _libcuda()
    keep, ptrs = [], []
    for a in args:
        if isinstance(a, torch.Tensor): v = ctypes.c_void_p(a.data_ptr())
        elif a is None: v = ctypes.c_void_p(0)
        else: v = ctypes.c_int(int(a))
        keep.append(v); ptrs.append(ctypes.cast(ctypes.byref(v), ctypes.c_void_p))
    params = (ctypes.c_void_p * len(ptrs))(*ptrs)
    attr = _LaunchAttr(id=6, value=1)  # CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION: allowed
    cfg = _LaunchConfig(*grid, *block, smem, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream),
                        ctypes.pointer(attr) if pdl else None, 1 if pdl else 0)
    _check(lib.cuLaunchKernelEx(ctypes.byref(cfg), fn, params, None), 'cuLaunchKernelEx')


SCALE_MODES = {'tensor': 1, 'channel': 2, 'block': 3}


def mma_linear(x, packed, scale, mode='channel', *, out=None, act=None, WN=4, U=8, split=1, ctas=None, pdl=False,
               early=False, argmax=None, pro=1, mma=1, layout=0):
    """y = act(x) @ (scale * W)^T with W packed by pack_mma. x [M, K] (or [M, 2K] with act='silu_mul') bf16 or float32,
    M <= 16. out: float32 [M, N] to add into (atomics; any split); else a new bf16 [M, N] (split 1).
    argmax: (pv, pi) float32/int32 [M, N/16] per-tile partials for the head (split 1). ctas: CTAs per K slice
    (persistent; default one per 16 WN rows)."""
    M = x.shape[0]
    NT, KT = packed.shape[:2] if not layout else packed.shape[1::-1]
    N, K = NT * 16, KT * 32
    if M > 16: raise ValueError(f"mma_linear serves M <= 16 tokens, got {M}")
    MT = 1 if M <= 8 else 2
    k_split = min(K, math.ceil(K / split / 32) * 32)
    nsplit = math.ceil(K / k_split)
    OUT = 2 if argmax is not None else (1 if out is not None else 0)
    if OUT != 1 and nsplit > 1: raise ValueError("split-K needs out= (float32 accumulation)")
    if out is None and argmax is None: out = torch.empty(M, N, device=x.device, dtype=torch.bfloat16)
    fn = kernel(MT, WN, U, SCALE_MODES[mode], OUT, int(x.dtype == torch.float32), int(act == 'silu_mul'), int(pdl),
                int(early), pro, mma, layout)
    P = math.ceil(NT / WN)
    if ctas: P = min(P, ctas)
    pv, pi = argmax if argmax is not None else (None, None)
    launch(fn, (P, nsplit, 1), (32 * WN, 1, 1), smem_bytes(K, k_split, MT, WN, U, mma),
           [packed, scale, x, out, pv, pi, M, N, K, k_split, x.stride(0), out.stride(0) if out is not None else 0,
            scale.stride(0) if scale.dim() == 2 else 1], pdl=pdl)
    return out
