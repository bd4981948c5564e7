#!/usr/bin/env python
"""Execute notebooks in place and keep their outputs (the way nbdev notebooks are committed).

    .venv/bin/python tools/run_nb.py nbs/00_fp8.ipynb [more.ipynb ...] [--skip-flags notest,slow]

Cells flagged with one of `--skip-flags` (default: none, i.e. everything runs; pass `notest` to keep a
training cell's committed output instead of re-running it) keep their old outputs. Runs from the
notebook's folder, as nbdev_test does. Follow with `nbdev_clean` before committing.
"""
import sys, os, argparse, re
from pathlib import Path
from execnb.nbio import read_nb, write_nb
from execnb.shell import CaptureShell

def _flags(src):
    return {w for l in src.splitlines() if l.startswith('#|') for w in l[2:].split()}

def run(path, skip=()):
    path = Path(path).resolve(); nb = read_nb(path)
    old = os.getcwd(); os.chdir(path.parent)
    try:
        sh = CaptureShell(path)
        for cell in nb.cells:
            if cell.cell_type != 'code': continue
            if skip and _flags(cell.source) & set(skip): continue
            cell['outputs'] = []   # execnb keeps a cell's old outputs when the new run prints nothing
            sh.cell(cell)
            errs = [o for o in cell.get('outputs', []) if o.get('output_type') == 'error']
            if errs:
                print(f"{path.name}: error in cell:\n{cell.source[:400]}\n{errs[0].get('ename')}: {errs[0].get('evalue')}")
                write_nb(nb, path); return False
    finally: os.chdir(old)
    write_nb(nb, path); print(f"{path.name}: ok"); return True

if __name__ == '__main__':
    ap = argparse.ArgumentParser(); ap.add_argument('nbs', nargs='+'); ap.add_argument('--skip-flags', default='')
    a = ap.parse_args(); skip = [f for f in a.skip_flags.split(',') if f]
    ok = all([run(p, skip) for p in a.nbs]); sys.exit(0 if ok else 1)
