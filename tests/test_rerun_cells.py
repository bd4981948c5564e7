"""A notebook's export cells run again in a process that imported the package, as in `nbdev_test`'s reused workers or a
user re-running a cell: the package's handles must keep working. In a subprocess (it changes vLLM's registry)."""
import subprocess, sys, textwrap
from pathlib import Path

NBS = Path(__file__).resolve().parent.parent / 'nbs'

SCRIPT = textwrap.dedent('''
    import json, sys, torch
    from pathlib import Path
    NBS = Path(sys.argv[1])

    def rerun(nb):
        "Run the `#| export` cells of notebook `nb` in a fresh namespace, as a notebook kernel does; returns the namespace."
        ns = {'__name__': '__main__'}
        for c in json.loads((NBS / nb).read_text())['cells']:
            src = ''.join(c['source'])
            if c['cell_type'] == 'code' and src.lstrip().startswith(('#| export', '#|export')): exec(compile(src, nb, 'exec'), ns)
        return ns

    # the ops: the package's handles stay the live ops and compute after the cells that define them run again
    import mtp_lit.kernels as K, mtp_lit.draft_moe as M
    from torch._library.custom_ops import OPDEFS
    from mtp_lit.fp8 import quantize_fp8
    rerun('06b_kernels.ipynb'); rerun('07a_draft_moe.ipynb')
    assert OPDEFS['mtp_lit::fp8_linear'] is K.fp8_linear_op and OPDEFS['mtp_lit::fp8_linear_argmax'] is K.fp8_linear_argmax_op
    assert OPDEFS['mtp_lit::fp8_moe'] is M.fp8_moe_op
    q, s = quantize_fp8(torch.randn(8, 256), 'per-channel'); x = torch.randn(3, 256)
    assert torch.equal(K.fp8_linear_op(x, q, s), K.fp8_linear(x, q, s))

    # the plugin: the notebook's register() first, then the package's, which still finds vLLM's own generic drafts
    ns = rerun('06_plugin.ipynb'); ns['register']()
    import mtp_lit.plugin as P
    P.register()
    assert P._GENERIC and P._GENERIC == ns['_GENERIC'], (P._GENERIC, ns['_GENERIC'])
    key = sorted(P._GENERIC)[0]
    cls = getattr(P, key)
    assert cls.__mro__[1].__module__.startswith('vllm.'), cls.__mro__
    print('ok', len(P._GENERIC), key)
''')

def test_export_cells_run_again():
    r = subprocess.run([sys.executable, '-c', SCRIPT, str(NBS)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.startswith('ok'), r.stdout[-2000:] + r.stderr[-4000:]
