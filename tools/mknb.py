#!/usr/bin/env python
"""Write a notebook from a plain-text cell list (an authoring aid; the .ipynb is the source of truth).

    .venv/bin/python tools/mknb.py SRC.txt nbs/NN_name.ipynb

SRC: cells separated by marker lines: `%%md` starts a markdown cell, `%%` a code cell; text is taken as is.
The written notebook has no outputs: run `tools/run_nb.py` on it, then `nbdev_clean`.
"""
import sys, json

def cells_from(text):
    cells, kind, buf = [], None, []
    def flush():
        if kind is not None:
            src = '\n'.join(buf).strip('\n')
            c = {'cell_type': 'markdown' if kind == 'md' else 'code', 'metadata': {}, 'source': src}
            if kind == 'code': c.update(execution_count=None, outputs=[])
            cells.append(c)
    for line in text.splitlines():
        s = line.rstrip()
        if s in ('%%md', '%%'):
            flush(); kind, buf = ('md' if s == '%%md' else 'code'), []
        else: buf.append(line)
    flush(); return cells

if __name__ == '__main__':
    src, dst = sys.argv[1:3]
    nb = {'cells': cells_from(open(src).read()), 'metadata': {'kernelspec': {'display_name': 'python3', 'language': 'python', 'name': 'python3'}},
          'nbformat': 4, 'nbformat_minor': 5}
    json.dump(nb, open(dst, 'w'), indent=1); print('wrote', dst, len(nb['cells']), 'cells')
