"""What the device probes of round 4 share: their start (`--out DIR`, default $OUT, the device tool's output folder, and
a `log` that prints and appends to DIR/NAME.log) and the baseline they time against (the tuned Triton linear, used as
in the draft step)."""
import argparse, os


def probe_args(name, add=None):
    "Parse `--out` (plus what `add(parser)` adds); returns (args, log), log(*s) printing to stdout and DIR/NAME.log."
    ap = argparse.ArgumentParser(); ap.add_argument('--out', default=os.environ.get('OUT', '.'))
    if add: add(ap)
    a = ap.parse_args()
    f = open(os.path.join(a.out, f'{name}.log'), 'w')
    def log(*s):
        print(*s, flush=True); print(*s, file=f, flush=True)
    return a, log


def time_tuned(x, qs, s, out, head):
    """Milliseconds per call of the tuned Triton FP8 linear on x [M, K] over the weight copies `qs` (per-channel scale
    `s`), as the draft step runs it: the head through fp8_linear_argmax, a layer linear added into float32 `out`."""
    from mtp_lit.kernels import time_graph, fp8_linear, fp8_linear_argmax, select_config, linear_use
    M, K = x.shape
    N = qs[0].shape[0]
    if head:
        tc = select_config(M, N, K, 'channel')
        return time_graph([(lambda w=w: fp8_linear_argmax(x, w, s, config=tc)) for w in qs])
    tc = select_config(M, N, K, 'channel', use=linear_use(True, None))
    return time_graph([(lambda w=w: fp8_linear(x, w, s, out=out, config=tc)) for w in qs])
