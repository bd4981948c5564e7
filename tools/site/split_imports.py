#!/usr/bin/env python
"""Move the imports of notebook cells that mix imports with other code into a cell of their own, for the docs build.

    .venv/bin/python tools/site/split_imports.py nbs/04_model.ipynb [more.ipynb ...] [--check]

While processing a notebook for the docs (`nbdev_docs`, `nbdev_proc_nbs`, tools/site/build.py), nbdev executes its
exported cells, its show_doc cells and every cell containing an import statement anywhere (nbdev.processors._do_eval),
in order, in a fresh kernel; other cells are not run. A cell that imports something and also uses names made by cells
that are not run fails there ("Error in notebook ... in cell N"), and one that does slow work runs it at every docs
build. This script rewrites each such cell (not exported, not `nbdev_export()`) as two: first an import-only cell with
the same `#|` flags (so `nbdev_test` skips it exactly when it skipped the original), then the rest, which keeps the
original cell's id and outputs. Imports at the top level of the cell and inside `with` / `for` / `while` / `if` / `try`
blocks are moved (a block left empty gets a `pass`); imports inside a `def` or `class` body are reported, not moved
(nbdev still runs that cell: move them by hand, or accept that it runs). Notebooks are written with execnb-style JSON;
run `nbdev_clean --fname NB` after. `--check`: change nothing, list the cells, exit 1 if any.
"""
import argparse, ast, json, sys, uuid
from pathlib import Path

_BLOCKS = (ast.With, ast.AsyncWith, ast.For, ast.AsyncFor, ast.While, ast.If, ast.Try)

def _flag_lines(src: str):
    lines = src.split('\n'); k = 0
    while k < len(lines) and (lines[k].startswith('#|') or not lines[k].strip()): k += 1
    return lines[:k], lines[k:]

def _movable(tree):
    "Import nodes outside def/class bodies (top level or in blocks), and those inside def/class bodies."
    move, stuck = [], []
    def walk(body, in_def):
        for n in body:
            if isinstance(n, (ast.Import, ast.ImportFrom)): (stuck if in_def else move).append(n)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)): walk(n.body, True)
            elif isinstance(n, _BLOCKS):
                for field in ('body', 'orelse', 'finalbody'): walk(getattr(n, field, []), in_def)
                for h in getattr(n, 'handlers', []): walk(h.body, in_def)
    walk(tree.body, False)
    return move, stuck

def split_source(src: str):
    """`(imports_cell, rest_cell, stuck)` for a cell mixing imports with other code, else None. `stuck`: imports inside
    def/class bodies, not moved."""
    flags, body = _flag_lines(src)
    code = '\n'.join(body)
    try: tree = ast.parse(code)
    except SyntaxError: return None
    move, stuck = _movable(tree)
    if not move or all(n in move for n in tree.body): return None      # no import to move, or imports only
    def rewrite(nested_pass: bool):
        lines, imp = list(body), []
        for n in sorted(move, key=lambda n: n.lineno, reverse=True):
            first, last = n.lineno - 1, n.end_lineno - 1
            seg = ast.get_source_segment(code, n)
            line = lines[first]; indent = line[:len(line) - len(line.lstrip())]
            alone = first != last or line.split('#')[0].strip() == seg.strip()
            if alone:
                imp.insert(0, '\n'.join([line.strip()] + lines[first + 1:last + 1]))
                lines[first:last + 1] = [indent + 'pass'] if (nested_pass and n not in tree.body) else []
            else:                                     # `import x; x.f()` on one line
                imp.insert(0, seg)
                lines[first] = indent + (line[:n.col_offset] + line[n.end_col_offset:]).strip().lstrip(';').strip()
        while lines and not lines[0].strip(): lines.pop(0)
        return imp, lines
    imp, rest = rewrite(False)
    try: ast.parse('\n'.join(rest))
    except SyntaxError: imp, rest = rewrite(True)     # a block whose only statement was the import
    return '\n'.join(flags + imp), '\n'.join(flags + rest), [ast.unparse(n) for n in stuck]

def process(path, check=False) -> list:
    "Split the mixed cells of notebook `path` (unless `check`); returns a line per cell found."
    nb = json.loads(Path(path).read_text()); cells, found = [], []
    for i, c in enumerate(nb['cells']):
        src = ''.join(c['source']) if isinstance(c['source'], list) else c['source']
        flags, _ = _flag_lines(src)
        words = {w for l in flags for w in l[2:].replace(':', ' ').split()}
        if c['cell_type'] == 'code' and 'nbdev_export' + '()' not in src and not words & {'export', 'exports', 'exporti', 'exec_doc'}:
            r = split_source(src)
            if r is None:
                try: stuck = _movable(ast.parse('\n'.join(_flag_lines(src)[1])))[1]
                except SyntaxError: stuck = []
                if stuck: found.append(f"{path}: cell {i} ({c.get('id')}): imports inside def/class, not moved: {[ast.unparse(n) for n in stuck]}")
            if r:
                imp, rest, stuck = r
                found.append(f"{path}: cell {i} ({c.get('id')}): {imp.splitlines()[-1][:70]}"
                             + (f"; not moved (inside def/class): {stuck}" if stuck else ''))
                if not check:
                    cells.append({'cell_type': 'code', 'execution_count': None, 'id': uuid.uuid4().hex[:8], 'metadata': {},
                                  'outputs': [], 'source': imp.splitlines(True)})
                    c['source'] = rest.splitlines(True)
        cells.append(c)
    if found and not check:
        nb['cells'] = cells
        Path(path).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + '\n')
    return found

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0]); ap.add_argument('nbs', nargs='+')
    ap.add_argument('--check', action='store_true', help='list the cells, change nothing; exit 1 if any')
    a = ap.parse_args()
    found = [l for p in a.nbs for l in process(p, a.check)]
    print('\n'.join(found) or 'no cell mixes imports with other code')
    sys.exit(1 if a.check and found else 0)
