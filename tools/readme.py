#!/usr/bin/env python
"""Write README.md from nbs/index.ipynb without Quarto (what `nbdev_readme` does when Quarto is installed).

Markdown cells are copied; code cells are shown as ```python blocks followed by their text output, except
cells flagged `#| hide`; directives (`#| ...`) are dropped. `--check` exits 1 if README.md is out of date.
"""
import sys, json
from pathlib import Path

def _text(o):
    if o.get('output_type') == 'stream': return ''.join(o.get('text', ''))
    d = o.get('data', {})
    if 'text/markdown' in d: return None, ''.join(d['text/markdown'])
    return ''.join(d.get('text/plain', ''))

def render(nb_path='nbs/index.ipynb'):
    nb = json.load(open(nb_path)); parts = []
    for c in nb['cells']:
        src = ''.join(c['source']) if isinstance(c['source'], list) else c['source']
        if c['cell_type'] == 'markdown': parts.append(src.strip()); continue
        lines = src.splitlines()
        flags = {w for l in lines if l.startswith('#|') for w in l[2:].replace(':', ' ').split()}
        if 'hide' in flags or 'default_exp' in flags: continue
        code = '\n'.join(l for l in lines if not l.startswith('#|')).strip()
        if 'echo' in flags and 'false' in flags: code = ''
        if code: parts.append(f"```python\n{code}\n```")
        for o in c.get('outputs', []):
            t = _text(o)
            if isinstance(t, tuple): parts.append(t[1].strip())
            elif t and t.strip(): parts.append("```\n" + t.rstrip() + "\n```")
    return '\n\n'.join(p for p in parts if p) + '\n'

if __name__ == '__main__':
    md = render()
    if '--check' in sys.argv:
        ok = Path('README.md').exists() and Path('README.md').read_text() == md
        if not ok: print('README.md is out of date: run tools/readme.py'); sys.exit(1)
    else: Path('README.md').write_text(md); print('wrote README.md')
