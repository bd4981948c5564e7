#!/usr/bin/env python
"""Render the docs site offline, without Quarto: `make site` (= `.venv/bin/python tools/site/build.py`).

`nbdev_docs` (Quarto) builds the real site, deployed to GitHub Pages by .github/workflows/deploy.yaml.
Quarto cannot be installed everywhere, so this script renders the same pages from the same input:

1. nbdev's own processing, exactly what `nbdev_proc_nbs` runs (frontmatter, show_doc cells executed into
   signature + docstring markdown, exported/hidden cells dropped, backticked names linked), into `_proc/`.
   Only `nbdev.quarto._ensure_quarto` is replaced by a no-op, since it would try to install Quarto.
2. Each processed notebook to `_site/<page>.html` (the file names Quarto gives: `00_fp8.ipynb` -> `fp8.html`),
   with markdown-it-py (+ mdit-py-plugins: dollar math, `{...}` attributes, footnotes, definition lists)
   and Pygments; Quarto cell options honoured: `echo`, `output`, `include`, `code-fold`, `output: asis`.
3. The sidebar, prev/next links and page order from `nbs/sidebar.yml`; an "On this page" table of contents;
   heading ids made as pandoc makes them, so nbdev's `page.html#name` doc links resolve.
4. Math: `$...$`, `$$...$$` become `<span class="math inline|display">` (as pandoc writes them) and are typeset
   in the browser by the KaTeX copy in `tools/site/vendor/katex/` (no CDN; see its README for why vendored).
5. Widgets: the notebook's saved ipywidgets state (`application/vnd.jupyter.widget-state+json` in its
   metadata) is embedded and rendered live by `@jupyter-widgets/html-manager`'s `embed.js` (fetched once with
   `npm pack` at a pinned version and integrity, cached in `tools/site/.cache/`). Every widget also gets a
   static snapshot (its saved Output/Image/HTML children and control values), shown when the manager is
   absent (no npm, `--no-widgets`) and hidden by CSS once the live widget has rendered.

Every URL in the output is relative (links to `doc_host + doc_baseurl` are rewritten to local pages); the
site opens from `file://` or any static server. `_site/_build.json` lists the pages, their math count,
widgets and show_doc entries, pages the sidebar names that do not exist, and warnings: tests/test_site.py
reads it and checks every page in headless Chromium.

    .venv/bin/python tools/site/build.py [--out _site] [--force] [--no-widgets] [--skip-proc]

Exit status 0 unless the build itself fails; missing pages, notebooks nbdev could not process and error
outputs are printed as warnings and recorded in `_build.json` (the test fails on them).
Dev dependencies: markdown-it-py, mdit-py-plugins, Pygments, PyYAML (nbdev's), and npm for the widget manager.
"""
from __future__ import annotations
import argparse, base64, hashlib, html, json, os, re, shutil, subprocess, sys, tarfile, tempfile
from pathlib import Path
from urllib.parse import urlsplit, unquote

KATEX_VERSION = '0.19.1'
HTML_MANAGER = '@jupyter-widgets/html-manager@1.0.15'
HTML_MANAGER_INTEGRITY = 'sha512-5thBIV6ymNgmPVOHvzx+gGy8ZSKmSazhtGw4/c4xJDVzRhG9PTeQsRjF3FUTopvFi//SABeNz1yp47bCrJ3CQA=='
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
WIDGET_STATE = 'application/vnd.jupyter.widget-state+json'
WIDGET_VIEW = 'application/vnd.jupyter.widget-view+json'
_ANSI = re.compile(r'\x1B(?:[@-Z\\-_]|\[[0-?]*[ -/]*[@-~])')

def log(*a): print('site:', *a, file=sys.stderr, flush=True)

# ---------------------------------------------------------------------------------------------------------
# 1. nbdev processing

def nbpath2html(name: str) -> str:
    "Output file Quarto/nbdev give a notebook: `00_fp8.ipynb` -> `fp8.html` (nbdev.doclinks._nbpath2html)."
    p = Path(name)
    return str(p.with_name(re.sub(r'^\d+[a-zA-Z0-9]*_', '', p.name.lower())).with_suffix('.html'))

def _proc_one(src: Path, dst: Path) -> str | None:
    "Process one notebook in a fresh interpreter, as nbdev's spawned workers do; the error text or None."
    code = ('import sys; from pathlib import Path; from nbdev.serve_drv import main; '
            'from nbdev.processors import FilterDefaults; main((Path(sys.argv[1]), Path(sys.argv[2]), FilterDefaults))')
    r = subprocess.run([sys.executable, '-c', code, str(src), str(dst)], capture_output=True, text=True, cwd=ROOT)
    return None if r.returncode == 0 else (r.stderr.strip() or r.stdout.strip() or f'exit status {r.returncode}')

def mixed_import_cells(nb_path: Path) -> list[str]:
    """Code cells that nbdev's docs processing executes although they are not exported: an import together with
    other statements (nbdev's "Found cells containing imports and other code"). They fail there when they use names
    from cells it does not run, and run any slow work they contain at every docs build."""
    import ast
    nb, res = json.loads(nb_path.read_text()), []
    for i, c in enumerate(nb.get('cells', [])):
        if c.get('cell_type') != 'code': continue
        opts, code = cell_options(_src(c.get('source', '')))
        if {'export', 'exports', 'exporti', 'exec_doc'} & set(opts) or _false(opts.get('eval', True)): continue
        if 'nbdev_export' + '()' in code: continue          # nbdev never runs these (processors._do_eval)
        try: tree = ast.parse('\n'.join(l for l in code.split('\n') if not l.lstrip().startswith(('%', '!'))))
        except SyntaxError: continue
        nodes = list(ast.walk(tree))
        if any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in nodes) and any(isinstance(n, (ast.Expr, ast.Assign)) for n in nodes):
            res.append(f'cell {i}: {code.strip().splitlines()[0][:80]}')
    return res

def run_nbdev_proc(force=False) -> dict[str, str]:
    """Run nbdev's `nbdev_proc_nbs` into `_proc/` (Quarto not required); return {notebook: error} for
    notebooks nbdev could not process (those are retried one by one so one broken notebook spares the rest)."""
    import nbdev.quarto as q
    from nbdev.config import get_config
    cfg = get_config(); cache = cfg.config_path/'_proc'
    # not nbdev's `force`: it would also regenerate nbs/sidebar.yml (custom_sidebar is ignored under force)
    if force: shutil.rmtree(cache, ignore_errors=True)
    # nbdev skips a notebook older than the _proc/ folder's mtime, which it touches at the end of a run: an edit made
    # while a run was going on would never be processed. Drop every processed copy older than its notebook first.
    for src in cfg.nbs_path.rglob('*.ipynb'):
        dst = cache/src.relative_to(cfg.nbs_path)
        if dst.exists() and dst.stat().st_mtime < src.stat().st_mtime: dst.unlink()
    q._ensure_quarto = lambda: None
    try:
        q.nbdev_proc_nbs.__wrapped__()
        return _save_errors(cache, {})
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt): raise
        log(f'nbdev_proc_nbs failed ({type(e).__name__}); processing notebooks one at a time')
    errors = {}
    for src in sorted(cfg.nbs_path.rglob('*.ipynb')):
        rel = src.relative_to(cfg.nbs_path)
        if any(p.startswith(('.', '_')) for p in rel.parts): continue
        dst = cache/rel
        if dst.exists() and dst.stat().st_mtime >= src.stat().st_mtime: continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        err = _proc_one(src, dst)
        if err: errors[str(rel)] = err; log(f'nbdev could not process {rel}:\n{err[-1500:]}')
    return _save_errors(cache, errors)

def _save_errors(cache: Path, errors: dict) -> dict:
    "Remember which notebooks nbdev could not process, for `--skip-proc` runs (their _proc/ copies may be stale)."
    (cache/'_mtp_lit_proc_errors.json').write_text(json.dumps(errors, indent=1)); return errors

def load_errors() -> dict:
    p = ROOT/'_proc'/'_mtp_lit_proc_errors.json'
    return json.loads(p.read_text()) if p.exists() else {}

# ---------------------------------------------------------------------------------------------------------
# 2. markdown

def pandoc_id(text: str) -> str:
    "Heading identifier as pandoc's `auto_identifiers` makes it (what Quarto uses, and nbdev's doc links assume)."
    s = ''.join(c for c in text if c.isalnum() or c in '_-. \n\t')
    s = re.sub(r'\s+', '-', s.strip()).lower()
    s = re.sub(r'^[^a-z]+', '', s)
    return s or 'section'

_FENCE = re.compile(r'^(\s*)(`{3,}|~{3,})')
_DIV_OPEN = re.compile(r'^:::+\s*\{([^}]*)\}\s*$|^:::+\s*([A-Za-z][\w-]*)\s*$')
_DIV_CLOSE = re.compile(r'^:::+\s*$')

def _attr_classes(attrs: str):
    classes = re.findall(r'(?:^|\s)\.([\w-]+)', attrs)
    ident = re.findall(r'(?:^|\s)#([\w-]+)', attrs)
    kv = dict(re.findall(r'([\w-]+)="([^"]*)"', attrs))
    return classes, (ident[-1] if ident else None), kv

def fenced_divs(md: str) -> str:
    "Pandoc fenced divs (`::: {.callout-note}` ... `:::`) to HTML blocks markdown-it keeps; fences left alone."
    out, fence, depth = [], None, 0
    for line in md.split('\n'):
        m = _FENCE.match(line)
        if fence:
            if m and m.group(2)[0] == fence[0] and len(m.group(2)) >= len(fence): fence = None
            out.append(line); continue
        if m: fence = m.group(2); out.append(line); continue
        o = _DIV_OPEN.match(line)
        if o:
            classes, ident, kv = _attr_classes(o.group(1) or '.' + o.group(2))
            cls = ' '.join(classes + (['callout'] if any(c.startswith('callout-') for c in classes) else []))
            title = kv.get('title')
            attrs = (f' id="{html.escape(ident)}"' if ident else '') + (f' class="{html.escape(cls)}"' if cls else '')
            out += ['', f'<div{attrs}>'] + ([f'<div class="callout-title">{html.escape(title)}</div>'] if title else []) + ['']
            depth += 1; continue
        if depth and _DIV_CLOSE.match(line):
            out += ['', '</div>', '']; depth -= 1; continue
        out.append(line)
    out += ['', '</div>'] * depth
    return '\n'.join(out)

class Markdown:
    "markdown-it renderer with pandoc-style math spans, heading ids, Pygments highlighting and link rewriting."
    def __init__(self, page):
        from markdown_it import MarkdownIt
        from mdit_py_plugins.dollarmath import dollarmath_plugin
        from mdit_py_plugins.attrs import attrs_plugin, attrs_block_plugin
        from mdit_py_plugins.footnote import footnote_plugin
        from mdit_py_plugins.deflist import deflist_plugin
        self.page = page
        md = MarkdownIt('commonmark', {'html': True, 'typographer': False, 'highlight': highlight})
        md.enable(['table', 'strikethrough'])
        # pandoc's tex_math_dollars: no space inside the $ pair, no digit right after the closing $
        md.use(dollarmath_plugin, allow_space=False, allow_digits=True, double_inline=True, allow_labels=False)
        md.inline.ruler.at('math_inline', _pandoc_dollar_rule())
        for rule, display in (('math_inline', False), ('math_inline_double', True), ('math_block', True)):
            md.add_render_rule(rule, self._math_rule(display, rule == 'math_block'))
        md.use(attrs_plugin, spans=True).use(attrs_block_plugin).use(footnote_plugin).use(deflist_plugin)
        md.core.ruler.push('mtp_lit_headings', self._headings)
        md.core.ruler.push('mtp_lit_links', self._links)
        self.md = md

    def _math_rule(self, display, block):
        "Math as pandoc writes it for HTML (`<span class=\"math inline\">\\(..\\)</span>`), typeset by site.js."
        def render(renderer, tokens, idx, options, env):
            self.page.math += 1
            tex = html.escape(tokens[idx].content.strip())
            span = f'<span class="math display">\\[{tex}\\]</span>' if display else f'<span class="math inline">\\({tex}\\)</span>'
            return f'<p>{span}</p>\n' if block else span
        return render

    def _headings(self, state):
        toks = state.tokens
        for i, t in enumerate(toks):
            if t.type != 'heading_open': continue
            inline = toks[i + 1]
            # trailing pandoc attributes: `## Title {#id .class}`
            last = inline.children[-1] if inline.children else None
            ident = None
            if last is not None and last.type == 'text':
                m = re.search(r'\s*\{([^}]*)\}\s*$', last.content)
                if m:
                    classes, ident, _ = _attr_classes(m.group(1))
                    last.content = last.content[:m.start()]
                    if classes: t.attrSet('class', ' '.join(classes))
            text = ''.join(c.content for c in (inline.children or []) if c.type in ('text', 'code_inline', 'math_inline'))
            ident = t.attrGet('id') or ident or pandoc_id(text)
            ident = self.page.unique_id(ident)
            t.attrSet('id', ident)
            rendered = self.md.renderer.render(inline.children or [], self.md.options, state.env)
            self.page.headings.append((int(t.tag[1]), ident, text.strip(), re.sub(r'</?a\b[^>]*>', '', rendered)))

    def _links(self, state):
        def walk(tokens):
            for t in tokens:
                if t.type == 'link_open': t.attrSet('href', self.page.site.local_href(t.attrGet('href') or '', self.page))
                if t.type == 'image': t.attrSet('src', self.page.site.local_href(t.attrGet('src') or '', self.page))
                if t.children: walk(t.children)
        walk(state.tokens)

    def render(self, src: str) -> str: return self.md.render(fenced_divs(src))
    def inline(self, src: str) -> str: return self.md.renderInline(src)

def _pandoc_dollar_rule():
    """mdit-py-plugins' `$` rule with pandoc's digit rule done here: its own `allow_digits=False` check reads
    `src[pos - 1]` at pos 0, i.e. the *last* character, and so misses `$V$ = 248320` at the start of a table cell."""
    from mdit_py_plugins.dollarmath.index import math_inline_dollar
    inner = math_inline_dollar(allow_space=False, allow_digits=True, allow_double=True)
    def rule(state, silent):
        pos = state.pos
        if state.src[pos] != '$' or (pos > 0 and state.src[pos - 1].isdigit()): return False
        if not inner(state, True): return False
        end = state.pos; state.pos = pos
        if end < len(state.src) and state.src[end].isdigit(): return False  # `$20,000 and $30,000`
        if silent: state.pos = end; return True
        return inner(state, False)
    return rule

def highlight(code, lang, attrs=''):
    from pygments import highlight as _hl
    from pygments.lexers import get_lexer_by_name
    from pygments.formatters import HtmlFormatter
    from pygments.util import ClassNotFound
    lang = (lang or '').strip().lstrip('{').rstrip('}').lstrip('.')
    try: lexer = get_lexer_by_name(lang or 'text')
    except ClassNotFound: lexer = get_lexer_by_name('text')
    body = _hl(code, lexer, HtmlFormatter(nowrap=True))
    # starts with `<pre`, so markdown-it uses it as is instead of wrapping it in another <pre><code>
    return f'<pre class="sourceCode {html.escape(lang)}"><code>{body}</code></pre>'

# ---------------------------------------------------------------------------------------------------------
# 3. notebook -> page

def _src(x): return ''.join(x) if isinstance(x, list) else (x or '')

def _text(x):
    "Stream/plain text with ANSI codes removed and carriage-return overwrites (progress bars) applied."
    s = _ANSI.sub('', _src(x))
    return '\n'.join(l.rsplit('\r', 1)[-1] if '\r' in l.rstrip('\r') else l.rstrip('\r') for l in s.split('\n'))

def cell_options(source: str):
    "Quarto `#| key: value` options and nbdev `#| flag` words at the top of a code cell; the code without them."
    opts, lines = {}, source.split('\n')
    i = 0
    while i < len(lines) and (lines[i].startswith('#|') or not lines[i].strip()):
        body = lines[i][2:].strip()
        if ':' in body:
            k, v = body.split(':', 1); opts[k.strip()] = v.strip().strip('"\'')
        else:
            for w in body.split(): opts[w] = True
        i += 1
    return opts, '\n'.join(lines[i:]).strip('\n')

def _false(v): return str(v).lower() in ('false', 'no', '0')

_PROC_HINT = """While processing a notebook for the docs, nbdev executes its exported cells, its show_doc cells and
every cell that contains an import, in a fresh kernel and in order; other cells are not run. A cell that
imports something and also uses names made by earlier non-exported cells therefore fails here (nbdev's FAQ:
"Found cells containing imports and other code"). Fix: move the import into a cell of its own (or into the
imports cell at the top) so the failing cell has no import statement: tools/site/split_imports.py NB does it."""

def error_nb(name: str, err: str) -> dict:
    "A stand-in processed notebook for one nbdev could not process: the error, as an error output (the test fails on it)."
    hint = _PROC_HINT if 'Error in notebook' in err or 'in cell' in err else ''
    return {'cells': [{'cell_type': 'raw', 'metadata': {}, 'source': f'---\ntitle: "{name}: nbdev processing failed"\n---'},
                      {'cell_type': 'markdown', 'metadata': {}, 'source': hint.replace('\n', ' ')},
                      {'cell_type': 'code', 'metadata': {}, 'source': '', 'outputs': [
                          {'output_type': 'error', 'ename': 'nbdev processing failed', 'evalue': name, 'traceback': err.split('\n')}]}],
            'metadata': {}}

class Page:
    def __init__(self, site, src_name: str, nb: dict):
        self.site, self.src_name, self.nb = site, src_name, nb
        self.math, self.headings, self._ids = 0, [], set()
        self.widgets, self.showdocs, self.errors, self.warnings, self.assets = [], [], [], [], {}
        self.fm = self._frontmatter()
        self.out = self.fm.get('output-file') or nbpath2html(src_name)
        self.out = str(Path(src_name).parent/Path(self.out).name) if '/' in src_name else self.out
        self.title = self.fm.get('title') or Path(src_name).stem
        self.depth = self.out.count('/')
        self.root = '../' * self.depth

    def unique_id(self, ident):
        base, n = ident, 0
        while ident in self._ids: n += 1; ident = f'{base}-{n}'
        self._ids.add(ident); return ident

    def _frontmatter(self):
        import yaml
        for c in self.nb['cells']:
            if c['cell_type'] == 'raw':
                s = _src(c['source']).strip()
                if s.startswith('---'):
                    c['_frontmatter'] = True
                    try: return yaml.safe_load(s.strip('-\n')) or {}
                    except yaml.YAMLError as e: self.warnings.append(f'frontmatter: {e}'); return {}
        return {}

    @property
    def widget_state(self):
        return ((self.nb.get('metadata') or {}).get('widgets') or {}).get(WIDGET_STATE) or {}

    # -- cells --
    def render(self) -> str:
        self.md = Markdown(self)
        parts = []
        for i, c in enumerate(self.nb['cells']):
            if c.get('_frontmatter'): continue
            if c['cell_type'] == 'markdown': parts.append(self.md.render(_src(c['source'])))
            elif c['cell_type'] == 'raw':
                fmt = (c.get('metadata') or {}).get('format') or (c.get('metadata') or {}).get('raw_mimetype') or ''
                if 'html' in fmt: parts.append(_src(c['source']))
            elif c['cell_type'] == 'code': parts.append(self.code_cell(c, i))
        return '\n'.join(p for p in parts if p)

    def code_cell(self, c, i) -> str:
        opts, code = cell_options(_src(c.get('source', '')))
        if _false(opts.get('include', True)): return ''
        sd = bool(c.get('has_sd')) or code.startswith('show_doc(')
        echo = not _false(opts.get('echo', True)) and code.strip()
        show_out = not _false(opts.get('output', True))
        asis = str(opts.get('output', '')).lower() == 'asis'
        parts = []
        if echo:
            block = f'<div class="sourceCode cell-code">{highlight(code, (c.get("metadata") or {}).get("language", "python"))}</div>'
            fold = opts.get('code-fold')
            if fold and not _false(fold):
                summary = html.escape(str(opts.get('code-summary', 'Code')))
                block = f'<details class="code-fold"{" open" if fold == "show" else ""}><summary>{summary}</summary>{block}</details>'
            parts.append(block)
        if show_out:
            for j, o in enumerate(c.get('outputs', [])):
                parts.append(self.output(o, f'{i}-{j}', asis=asis, showdoc=sd))
        body = '\n'.join(p for p in parts if p)
        if not body: return ''
        if asis and not echo: return body
        return f'<div class="cell">\n{body}\n</div>'

    def output(self, o, key, asis=False, showdoc=False, nested=0) -> str:
        t = o.get('output_type')
        if t == 'stream':
            txt = _text(o.get('text', ''))
            if not txt.strip(): return ''
            return f'<div class="cell-output cell-output-{o.get("name", "stdout")}"><pre><code>{html.escape(txt)}</code></pre></div>'
        if t == 'error':
            tb = _text('\n'.join(o.get('traceback') or [f"{o.get('ename')}: {o.get('evalue')}"]))
            self.errors.append(f"{o.get('ename')}: {o.get('evalue')}")
            return f'<div class="cell-output cell-output-error"><pre><code>{html.escape(tb)}</code></pre></div>'
        data = o.get('data') or {}
        inner = self.mime(data, key, showdoc=showdoc, nested=nested)
        if inner is None: return ''
        if asis: return inner
        return f'<div class="cell-output cell-output-display">{inner}</div>'

    def mime(self, data, key, showdoc=False, nested=0):
        if WIDGET_VIEW in data:
            return self.widget_view(data, key, nested)
        if 'text/html' in data: return self._html_out(_src(data['text/html']))
        for mt, ext in (('image/svg+xml', 'svg'), ('image/png', 'png'), ('image/jpeg', 'jpg'), ('image/gif', 'gif')):
            if mt in data:
                raw = _src(data[mt]).encode() if ext == 'svg' else base64.b64decode(_src(data[mt]))
                return f'<img src="{self.asset(raw, ext, key)}" alt="{html.escape(_src(data.get("text/plain", "output"))[:120])}">'
        if 'text/markdown' in data:
            md = _src(data['text/markdown'])
            if showdoc: self._record_showdoc(md)
            return self.md.render(md)
        if 'text/latex' in data:
            tex = _src(data['text/latex']).strip().strip('$')
            self.math += 1
            return f'<span class="math display">\\[{html.escape(tex)}\\]</span>'
        if 'application/json' in data:
            return f'<pre><code>{html.escape(json.dumps(data["application/json"], indent=1))}</code></pre>'
        if 'text/plain' in data:
            return f'<pre><code>{html.escape(_text(data["text/plain"]))}</code></pre>'
        return None

    def _html_out(self, s):
        s = re.sub(r'(href|src)="([^"]*)"', lambda m: f'{m.group(1)}="{html.escape(self.site.local_href(html.unescape(m.group(2)), self))}"', s)
        return s

    def asset(self, raw: bytes, ext: str, key: str) -> str:
        "Write an output image next to the page (`<page>_files/out-<cell>-<n>.<ext>`); its relative URL."
        name = f'{Path(self.out).stem}_files/out-{key}.{ext}'
        self.assets[name if self.depth == 0 else str(Path(self.out).parent/name)] = raw
        return Path(name).as_posix()

    def _record_showdoc(self, md):
        m = re.search(r'^#{2,6}\s+(\S+)\s*$', md, re.M)
        if not m: return
        sig = re.search(r'```python\n(.*?)```', md, re.S)
        after = md[sig.end():] if sig else md[m.end():]
        first = after.strip().split('\n\n')[0].strip()  # nbdev italicises the docstring's first line: `*...*`
        doc = re.sub(r'^\*(.*?)\*$', r'\1', first, count=1, flags=re.M).strip() if first.startswith('*') else ''
        self.showdocs.append({'name': m.group(1), 'id': pandoc_id(m.group(1)),
                              'signature': sig.group(1).strip() if sig else '', 'docstring': doc})

    # -- widgets --
    def widget_view(self, data, key, nested):
        view = data[WIDGET_VIEW]; mid = view.get('model_id')
        state = self.widget_state.get('state') or {}
        if mid not in state:
            self.warnings.append(f'widget {mid} has no saved state in the notebook metadata (static text shown)')
            self.widgets.append({'model_id': mid, 'state_saved': False})
            rest = {k: v for k, v in data.items() if k != WIDGET_VIEW}
            inner = self.mime(rest, key) if rest else ''
            return f'<div class="widget-missing"><p class="widget-note">Interactive widget: its state was not saved with the notebook.</p>{inner or ""}</div>'
        self.widgets.append({'model_id': mid, 'state_saved': True})
        static = self.widget_static(mid, state, key, set())
        tag = json.dumps(view).replace('</', '<\\/')
        return (f'<div class="widget-static" data-model-id="{html.escape(mid)}">{static}'
                f'<p class="widget-note">Static snapshot of an interactive widget (saved state).</p></div>'
                f'<script type="{WIDGET_VIEW}">{tag}</script>')

    def widget_static(self, mid, state, key, seen) -> str:
        "A static rendering of a saved widget: its selected/visible children, saved outputs, images and values."
        if mid in seen or mid not in state: return ''
        seen.add(mid)
        m = state[mid]; s = m.get('state') or {}; name = m.get('model_name', '')
        kids = [k[len('IPY_MODEL_'):] for k in s.get('children', []) if isinstance(k, str) and k.startswith('IPY_MODEL_')]
        sub = lambda k: self.widget_static(k, state, f'{key}-{k[:6]}', seen)
        if name == 'OutputModel':
            return ''.join(self.output(o, f'{key}-w{n}', nested=1) for n, o in enumerate(s.get('outputs', [])))
        if name in ('StackModel', 'TabModel', 'AccordionModel'):
            idx = s.get('selected_index', 0 if name != 'AccordionModel' else None)
            titles = s.get('titles') or []
            head = ''.join(f'<span class="widget-static-tab{" selected" if i == idx else ""}">{html.escape(str(t))}</span>'
                           for i, t in enumerate(titles)) if name != 'StackModel' else ''
            head = f'<div class="widget-static-tabs">{head}</div>' if head else ''
            return head + (sub(kids[idx]) if idx is not None and 0 <= idx < len(kids) else '')
        if kids: return f'<div class="widget-static-box">{"".join(sub(k) for k in kids)}</div>'
        if name == 'ImageModel':
            raw = None
            for b in m.get('buffers', []) or []:
                if b.get('path') == ['value']: raw = base64.b64decode(b.get('data', ''))
            if raw is None and isinstance(s.get('value'), str): raw = base64.b64decode(s['value'])
            if raw: return f'<img src="{self.asset(raw, s.get("format", "png").replace("svg+xml", "svg"), key)}" alt="widget image">'
            return ''
        if name in ('HTMLModel', 'HTMLMathModel'):
            v = s.get('value', '')
            if name == 'HTMLMathModel': v = self.md.inline(v)
            return f'<div class="widget-static-html">{v}</div>'
        if name in ('LabelModel',): return f'<div class="widget-static-label">{html.escape(str(s.get("value", "")))}</div>'
        if name.endswith('Model') and ('description' in s or 'value' in s or 'index' in s):
            if 'index' in s and '_options_labels' in s:
                idx = s['index']; labels = s['_options_labels']
                val = ', '.join(labels[i] for i in idx) if isinstance(idx, list) else (labels[idx] if isinstance(idx, int) and 0 <= idx < len(labels) else '')
            else: val = s.get('value', '')
            if name in ('LinkModel', 'DirectionalLinkModel'): return ''
            desc = s.get('description', '')
            return f'<div class="widget-static-control"><span class="widget-static-desc">{html.escape(str(desc))}</span> <code>{html.escape(str(val))}</code></div>'
        return ''

# ---------------------------------------------------------------------------------------------------------
# 4. site

def _sidebar_entries(items, section=None):
    "Flatten sidebar.yml `contents` into [(section, entry)] where entry is a file name or {'text','href'}."
    res = []
    for it in items or []:
        if isinstance(it, str): res.append((section, it))
        elif isinstance(it, dict) and 'section' in it:
            if it.get('href'): res.append((it['section'], it['href']))
            res += _sidebar_entries(it.get('contents'), it['section'])
        elif isinstance(it, dict) and 'href' in it: res.append((section, it))
    return res

class Site:
    def __init__(self, out: Path, widgets=True):
        import yaml
        from nbdev.config import get_config
        self.cfg = get_config(); self.out = out; self.widgets = widgets
        self.nbs, self.proc = self.cfg.nbs_path, self.cfg.config_path/'_proc'
        self.doc_prefix = (self.cfg.doc_host.rstrip('/') + '/' + self.cfg.doc_baseurl.strip('/') + '/').replace(':///', '://')
        sb = yaml.safe_load((self.nbs/'sidebar.yml').read_text()) if (self.nbs/'sidebar.yml').exists() else {}
        self.sidebar = ((sb or {}).get('website') or {}).get('sidebar') or {}
        meta = yaml.safe_load((self.nbs/'nbdev.yml').read_text()) if (self.nbs/'nbdev.yml').exists() else {}
        self.title = ((meta or {}).get('website') or {}).get('title') or self.cfg.get('title', self.cfg.lib_name)
        self.repo_url = self.cfg.get('git_url', '')
        self.pages: dict[str, Page] = {}; self.missing = []; self.not_in_sidebar = []; self.proc_errors = {}

    def local_href(self, href: str, page: Page) -> str:
        "Rewrite links to this site's published URL and to notebooks into relative links between pages."
        if href.startswith(self.doc_prefix): href = page.root + href[len(self.doc_prefix):]
        sp = urlsplit(href)
        if sp.scheme or sp.netloc or not sp.path: return href
        p = unquote(sp.path)
        if p.endswith(('.ipynb', '.qmd')):
            tgt = (Path(page.src_name).parent/p).as_posix()
            tgt = os.path.normpath(tgt)
            pg = self.pages.get(tgt)
            new = pg.out if pg else nbpath2html(tgt)
            rel = os.path.relpath(new, Path(page.out).parent.as_posix() or '.')
            return rel + (f'#{sp.fragment}' if sp.fragment else '')
        return href

    def collect(self):
        entries = _sidebar_entries(self.sidebar.get('contents'))
        self.order = []
        self.labels = {}
        for section, e in entries:
            if isinstance(e, dict):  # `{href: x.ipynb, text: label}`
                if e.get('text'): self.labels[e['href']] = str(e['text'])
                e = e['href']
            if urlsplit(e).scheme: continue
            if not (self.nbs/e).exists(): self.missing.append(e); continue
            self.order.append((section, e))
        named = {e for _, e in self.order} | set(self.missing)
        for src in sorted(self.nbs.rglob('*.ipynb')):
            rel = src.relative_to(self.nbs).as_posix()
            if any(p.startswith(('.', '_')) for p in Path(rel).parts): continue
            if rel not in named: self.not_in_sidebar.append(rel)
        for _, e in self.order: self._load(e)
        for e in self.not_in_sidebar: self._load(e)
        for e, page in self.pages.items():
            mixed = mixed_import_cells(self.nbs/e)
            if mixed: page.warnings.append(f'cells {", ".join(m.split(":")[0][5:] for m in mixed)} mix imports with other code '
                                           '(nbdev runs them while building the docs; fix: tools/site/split_imports.py)')

    def _load(self, e):
        if not e.endswith('.ipynb'): return
        pp = self.proc/e
        if e not in self.proc_errors and not pp.exists(): self.proc_errors[e] = 'not processed: run without --skip-proc'
        nb = error_nb(e, self.proc_errors[e]) if e in self.proc_errors else json.loads(pp.read_text())
        self.pages[e] = Page(self, e, nb)

    # -- html --
    def sidebar_html(self, page):
        out, open_section, cur = ['<ul class="sidebar-list">'], False, None
        for section, e in self.order:
            pg = self.pages.get(e)
            if pg is None: continue
            if section != cur:
                if open_section: out.append('</ul></li>')
                open_section = section is not None
                if open_section:
                    out.append(f'<li class="sidebar-section"><span class="sidebar-section-title">{html.escape(section)}</span><ul>')
                cur = section
            href = os.path.relpath(pg.out, Path(page.out).parent.as_posix() or '.')
            active = ' class="active" aria-current="page"' if pg is page else ''
            label = html.escape(self.labels[e]) if e in self.labels else self.inline_title(pg)
            out.append(f'<li><a href="{href}"{active}>{label}</a></li>')
        if open_section: out.append('</ul></li>')
        out.append('</ul>')
        return '\n'.join(out)

    def inline_title(self, pg):
        "A page title as inline HTML (titles may hold `code`); math is left as text here."
        from markdown_it import MarkdownIt
        return MarkdownIt('commonmark').renderInline(str(pg.title))

    def toc_html(self, page):
        hs = [(lvl, i, h) for lvl, i, _, h in page.headings if lvl in (2, 3)]
        if not hs: return ''
        items = ''.join(f'<li class="toc-h{lvl}"><a href="#{html.escape(i)}">{h}</a></li>' for lvl, i, h in hs)
        return f'<nav id="TOC" class="toc" aria-label="On this page"><h2>On this page</h2><ul>{items}</ul></nav>'

    def prevnext_html(self, page):
        seq = [self.pages[e] for _, e in self.order if e in self.pages]
        if page not in seq: return ''
        k = seq.index(page); here = Path(page.out).parent.as_posix() or '.'
        link = lambda p, cls, label: (f'<a class="{cls}" href="{os.path.relpath(p.out, here)}"><span class="nav-label">{label}</span>'
                                      f'<span class="nav-title">{self.inline_title(p)}</span></a>')
        prev = link(seq[k - 1], 'nav-prev', '&larr; Previous') if k > 0 else '<span></span>'
        nxt = link(seq[k + 1], 'nav-next', 'Next &rarr;') if k + 1 < len(seq) else '<span></span>'
        return f'<nav class="page-navigation">{prev}{nxt}</nav>'

    def page_html(self, page, body):
        r = page.root
        desc = page.fm.get('description') or ''
        desc_html = f'<div class="description">{page.md.render(str(desc))}</div>' if desc else ''
        wstate = page.widget_state if page.widgets else None
        scripts = [f'<script src="{r}_static/katex/katex.min.js"></script>', f'<script src="{r}_static/site.js"></script>']
        if wstate:
            js = json.dumps(wstate).replace('</', '<\\/')
            scripts.insert(0, f'<script type="{WIDGET_STATE}">{js}</script>')
            if self.widget_manager: scripts.append(f'<script src="{r}_static/widgets/embed.js"></script>')
        title = html.escape(str(page.title))
        head_title = title if page.out == 'index.html' else f'{title} – {html.escape(self.title)}'
        return f'''<!DOCTYPE html>
<html lang="en"><head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="mtp_lit tools/site/build.py (offline renderer of nbdev_proc_nbs output)">
<title>{head_title}</title>
<meta name="description" content="{html.escape(str(desc))}">
<link rel="stylesheet" href="{r}_static/katex/katex.min.css">
<link rel="stylesheet" href="{r}_static/pygments.css">
<link rel="stylesheet" href="{r}_static/site.css">
<link rel="stylesheet" href="{r}styles.css">
</head>
<body>
<header class="navbar"><a class="navbar-brand" href="{r}index.html">{html.escape(self.title)}</a>
<span class="navbar-tagline">{html.escape(self.cfg.get('description', ''))}</span>
<button class="sidebar-toggle" aria-label="Pages" onclick="document.body.classList.toggle('show-sidebar')">&#9776;</button></header>
<div class="page-layout">
<nav id="quarto-sidebar" class="sidebar" aria-label="Pages">{self.sidebar_html(page)}</nav>
<main id="quarto-document-content" class="content">
<header id="title-block-header"><h1 class="title">{page.md.inline(str(page.title))}</h1>{desc_html}</header>
{body}
{self.prevnext_html(page)}
</main>
{self.toc_html(page)}
</div>
{chr(10).join(scripts)}
</body></html>
'''

    def fetch_widget_manager(self) -> Path | None:
        "`npm pack` the pinned html-manager once (integrity checked) into tools/site/.cache; its dist/ or None."
        cache = HERE/'.cache'; dist = cache/'html-manager'/'package'/'dist'
        if (dist/'embed.js').exists(): return dist
        npm = shutil.which('npm')
        if not npm: log('npm not found: widgets get their static snapshot only'); return None
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as td:
            r = subprocess.run([npm, 'pack', HTML_MANAGER, '--pack-destination', td, '--silent'],
                               capture_output=True, text=True, cwd=td)
            tgz = next(Path(td).glob('*.tgz'), None)
            if r.returncode or tgz is None:
                log(f'npm pack {HTML_MANAGER} failed: widgets get their static snapshot only\n{r.stderr[-500:]}'); return None
            got = 'sha512-' + base64.b64encode(hashlib.sha512(tgz.read_bytes()).digest()).decode()
            if got != HTML_MANAGER_INTEGRITY: raise SystemExit(f'site: {tgz.name} integrity {got} != pinned {HTML_MANAGER_INTEGRITY}')
            with tarfile.open(tgz) as tf:
                members = [m for m in tf.getmembers() if m.name.startswith('package/dist/') and not m.name.endswith('.map')
                           and m.isfile() and '..' not in m.name]
                tf.extractall(cache/'html-manager', members=members)
        return dist if (dist/'embed.js').exists() else None

    def build(self):
        if self.out.exists(): shutil.rmtree(self.out)
        static = self.out/'_static'; static.mkdir(parents=True)
        shutil.copytree(HERE/'vendor'/'katex', static/'katex', ignore=shutil.ignore_patterns('README.md'))
        shutil.copy(HERE/'site.css', static/'site.css'); shutil.copy(HERE/'site.js', static/'site.js')
        from pygments.formatters import HtmlFormatter
        (static/'pygments.css').write_text(HtmlFormatter(style='friendly').get_style_defs('.sourceCode'))
        self.widget_manager = False
        if self.widgets and any(p.widget_state.get('state') for p in self.pages.values()):
            dist = self.fetch_widget_manager()
            if dist:
                shutil.copytree(dist, static/'widgets', ignore=shutil.ignore_patterns('embed-amd.js', 'libembed-amd.js', '*.map'))
                self.widget_manager = True
        # other files of nbs/ that nbdev copied into _proc (images, styles.css)
        for f in self.proc.rglob('*'):
            rel = f.relative_to(self.proc)
            if f.is_file() and f.suffix not in ('.ipynb', '.yml', '.yaml', '.py') and not any(p.startswith('.') for p in rel.parts) and f.name != '_mtp_lit_proc_errors.json':
                (self.out/rel).parent.mkdir(parents=True, exist_ok=True); shutil.copy(f, self.out/rel)
        if not (self.out/'styles.css').exists(): (self.out/'styles.css').write_text('')
        manifest = {'pages': [], 'missing': self.missing, 'not_in_sidebar': self.not_in_sidebar,
                    'widget_manager': self.widget_manager, 'katex': KATEX_VERSION,
                    'proc_errors': {k: v[-2000:] for k, v in self.proc_errors.items()}}
        for e, page in self.pages.items():
            try: body = page.render()
            except Exception as ex:  # a page the renderer cannot handle is reported, never silently dropped
                import traceback
                page.errors.append(f'renderer: {ex!r}'); page.md = Markdown(page)
                body = f'<pre class="render-error"><code>{html.escape(traceback.format_exc())}</code></pre>'
            dst = self.out/page.out; dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_text(self.page_html(page, body))
            for name, raw in page.assets.items():
                (self.out/name).parent.mkdir(parents=True, exist_ok=True); (self.out/name).write_bytes(raw)
            manifest['pages'].append({'source': e, 'html': page.out, 'title': page.title, 'math': page.math,
                                      'in_sidebar': e not in self.not_in_sidebar,
                                      'headings': [i for _, i, _, _ in page.headings], 'widgets': page.widgets,
                                      'showdoc': page.showdocs, 'errors': page.errors, 'warnings': page.warnings})
        (self.out/'.nojekyll').write_text('')
        (self.out/'_build.json').write_text(json.dumps(manifest, indent=1))
        return manifest

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--out', default='_site', help='output folder (default: _site, git-ignored)')
    ap.add_argument('--force', action='store_true', help='reprocess every notebook (deletes _proc/ first)')
    ap.add_argument('--no-widgets', action='store_true', help='do not fetch the widget manager: static widget snapshots only')
    ap.add_argument('--skip-proc', action='store_true', help='render the existing _proc/ without running nbdev processing')
    a = ap.parse_args(argv)
    os.chdir(ROOT)
    errs = load_errors() if a.skip_proc else run_nbdev_proc(force=a.force)
    site = Site(ROOT/a.out, widgets=not a.no_widgets); site.proc_errors = dict(errs)
    site.collect()
    m = site.build()
    for p in m['pages']:
        flags = ([f"{len(p['errors'])} error output(s)"] if p['errors'] else []) + p['warnings']
        log(f"{p['source']:28s} -> {p['html']:22s} math={p['math']:<3d} show_doc={len(p['showdoc']):<2d} widgets={len(p['widgets'])}"
            + (f"  !! {'; '.join(flags)}" if flags else ''))
    if m['missing']: log('sidebar names pages that do not exist:', ', '.join(m['missing']))
    if m['not_in_sidebar']: log('rendered but not in sidebar.yml:', ', '.join(m['not_in_sidebar']))
    log(f"wrote {a.out}/ ({len(m['pages'])} pages; widget manager: {'live' if m['widget_manager'] else 'static snapshots'}); "
        f"open {a.out}/index.html")
    return 0

if __name__ == '__main__': sys.exit(main())
