"""The docs site, checked in a real browser: every page of the offline render (tools/site/build.py) opened
in headless Chromium (Debian's `chromium`, driven by Playwright's Python package; never `playwright install`).

Fails on: a page that nbs/sidebar.yml names but does not exist (or a notebook it does not name), a notebook
nbdev could not process, a broken internal link (a page or `#anchor` that is not there), math left untypeset
(raw `$...$`, `\\(`, a `.katex-error`, or fewer typeset formulas than the source has), a Python traceback or
error output on a page, a JavaScript error, a request to anything but the local server (no CDN), a widget whose
state was not saved or that does not render, and a public function of `mtp_lit._modidx` with no signature +
docstring on its page.
Screenshots of every page go to `_site/_screenshots/` (`<page>.png`: first screen, `<page>.full.png`: whole page).

    .venv/bin/python -m pytest tests/test_site.py            # builds the site first (~1 min)
    MTP_LIT_SITE=_site .venv/bin/python -m pytest tests/test_site.py   # check an already built _site/

Skips when chromium or playwright is absent (CI installs both: see the report of the site tooling).
"""
import functools, http.server, importlib.util, json, os, re, shutil, tempfile, threading
from pathlib import Path
from urllib.parse import urlsplit, unquote
import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get('MTP_LIT_CHROMIUM') or shutil.which('chromium') or shutil.which('chromium-browser')
ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
        '--disable-component-update', '--disable-sync']

def _skip_reason():
    if not CHROMIUM: return 'chromium not installed (apt-get install -y chromium)'
    if importlib.util.find_spec('playwright') is None: return 'playwright (PyPI) not installed'
    for m in ('markdown_it', 'mdit_py_plugins', 'pygments'):
        if importlib.util.find_spec(m) is None: return f'{m} not installed (dev dependency of the site renderer)'

pytestmark = pytest.mark.skipif(bool(_skip_reason()), reason=_skip_reason() or '')

def _build_module():
    spec = importlib.util.spec_from_file_location('mtp_lit_site_build', ROOT/'tools'/'site'/'build.py')
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod); return mod

class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a): pass

# JavaScript run in every page once it has settled: ids, links, math and widget state, visible text.
_PROBE = r"""() => {
  const clone = document.querySelector('main').cloneNode(true);
  clone.querySelectorAll('.katex, script, style, pre, code, .widget-subarea').forEach(e => e.remove());
  const math = Array.from(document.querySelectorAll('span.math'));
  return {
    ids: Array.from(document.querySelectorAll('[id]')).map(e => e.id),
    links: Array.from(document.querySelectorAll('a[href]')).map(a => [a.getAttribute('href'), a.href]),
    srcs: Array.from(document.querySelectorAll('img[src], script[src], link[href]')).map(e => e.src || e.href),
    math_spans: math.length,
    math_typeset: math.filter(e => e.querySelector('.katex')).length,
    katex_errors: Array.from(document.querySelectorAll('.katex-error')).map(e => e.textContent.slice(0, 80)),
    prose: clone.innerText,
    text: document.body.innerText,
    error_outputs: document.querySelectorAll('.cell-output-error').length,
    widget_views: document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]').length,
    widget_live: document.querySelectorAll('.widget-subarea > *').length,
    widget_static_visible: Array.from(document.querySelectorAll('.widget-static')).filter(e => e.offsetParent !== null).length,
    widget_missing: document.querySelectorAll('.widget-missing').length,
    sidebar: Array.from(document.querySelectorAll('#quarto-sidebar a')).map(a => a.getAttribute('href')),
  };
}"""

# raw math left in prose: pandoc's `$x$` rule (no space inside, no digit after), `$$`, `\(`, `\[`
_RAW_MATH = re.compile(r'(?<![\\$\w])\$(?=[^\s$])[^$\n]*?[^\s$\\]\$(?!\d)|\$\$|\\\(|\\\[')

@pytest.fixture(scope='module')
def site():
    given = os.environ.get('MTP_LIT_SITE')
    out = Path(given) if given else ROOT/'_site'
    if not out.is_absolute(): out = ROOT/out
    if not given:
        assert _build_module().main(['--out', str(out.relative_to(ROOT))]) == 0
    manifest = json.loads((out/'_build.json').read_text())
    shots = out/'_screenshots'; shots.mkdir(exist_ok=True)

    handler = functools.partial(_Quiet, directory=str(out))
    srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    base = f'http://127.0.0.1:{srv.server_address[1]}/'

    from playwright.sync_api import sync_playwright
    html_files = sorted(p.relative_to(out).as_posix() for p in out.rglob('*.html')
                        if not p.relative_to(out).as_posix().startswith(('_static/', '_screenshots/')))
    visits, foreign, failed, js_errors = {}, [], [], []
    with tempfile.TemporaryDirectory() as prof, sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(prof, executable_path=CHROMIUM, headless=True, args=ARGS,
                                                    viewport={'width': 1280, 'height': 1000})
        cur = {'page': None}
        def route(r):
            u = r.request.url
            if u.startswith(base) or u.startswith(('data:', 'blob:', 'about:')): return r.continue_()
            foreign.append((cur['page'], u)); r.abort()
        ctx.route('**/*', route)
        ctx.on('requestfailed', lambda req: req.url.startswith(base) and failed.append((cur['page'], req.url, req.failure)))
        ctx.on('response', lambda r: r.url.startswith(base) and r.status >= 400 and failed.append((cur['page'], r.url, r.status)))
        pg = ctx.new_page()
        pg.on('pageerror', lambda e: js_errors.append((cur['page'], str(e))))
        for f in html_files:
            cur['page'] = f
            resp = pg.goto(base + f, wait_until='networkidle')
            info = manifest_page(manifest, f)
            if info and info['widgets']:  # the widget manager renders after `load`: wait for it (bounded)
                try: pg.wait_for_function("n => document.querySelectorAll('.widget-subarea > *').length >= n",
                                          arg=len(info['widgets']), timeout=15000)
                except Exception: pass
            v = pg.evaluate(_PROBE); v['status'] = resp.status if resp else None
            name = f[:-5].replace('/', '__')
            pg.screenshot(path=str(shots/f'{name}.png'))
            pg.screenshot(path=str(shots/f'{name}.full.png'), full_page=True)
            visits[f] = v
        ctx.close()
    srv.shutdown()
    return dict(out=out, manifest=manifest, visits=visits, foreign=foreign, failed=failed, js_errors=js_errors, base=base)

def manifest_page(manifest, html_name):
    return next((p for p in manifest['pages'] if p['html'] == html_name), None)

def test_sidebar_pages_exist(site):
    m = site['manifest']
    assert not m['missing'], f"nbs/sidebar.yml names pages that do not exist: {m['missing']}"
    assert not m['not_in_sidebar'], f"notebooks missing from nbs/sidebar.yml (no reader finds them): {m['not_in_sidebar']}"
    for p in m['pages']:
        if p['in_sidebar']: assert p['html'] in site['visits'] and site['visits'][p['html']]['status'] == 200, p['html']
    # every page shows the sidebar with every sidebar page in it
    want = sorted(p['html'] for p in m['pages'] if p['in_sidebar'])
    for f, v in site['visits'].items():
        got = sorted(os.path.normpath(os.path.join(os.path.dirname(f), h)) for h in v['sidebar'])
        assert got == want, f'{f}: sidebar {got} != {want}'

def test_notebooks_processed(site):
    errs = site['manifest']['proc_errors']
    hint = ('\n\nnbdev runs exported cells, show_doc cells and every cell containing an import while it processes '
            'notebooks for the docs (nbdev_docs too); a cell that imports and also uses names from cells it does not '
            'run fails. Move such imports into a cell of their own.')
    assert not errs, 'nbdev could not process: ' + '\n\n'.join(f'{k}:\n{v[-800:]}' for k, v in errs.items()) + hint

def test_only_local_requests(site):
    assert not site['foreign'], f"requests to non-local URLs (CDN?): {site['foreign'][:10]}"
    assert not site['failed'], f"local requests that failed (missing asset?): {site['failed'][:10]}"
    assert not site['js_errors'], f"JavaScript errors: {site['js_errors'][:5]}"

def test_internal_links(site):
    base, out, visits, bad = site['base'], site['out'], site['visits'], []
    for f, v in visits.items():
        for raw, absu in v['links'] + [(u, u) for u in v['srcs']]:
            if not absu.startswith(base): continue
            sp = urlsplit(absu); path = unquote(sp.path)[1:] or 'index.html'
            if path.endswith('/'): path += 'index.html'
            if not (out/path).exists(): bad.append(f'{f}: {raw} -> missing {path}'); continue
            if sp.fragment and path.endswith('.html'):
                ids = visits[path]['ids'] if path in visits else []
                if unquote(sp.fragment) not in ids: bad.append(f'{f}: {raw} -> no #{sp.fragment} in {path}')
    assert not bad, f'{len(bad)} broken internal links:\n' + '\n'.join(bad[:40])

def test_math_typeset(site):
    bad = []
    for f, v in site['visits'].items():
        info = manifest_page(site['manifest'], f)
        want = info['math'] if info else 0
        if v['math_spans'] != want: bad.append(f'{f}: {v["math_spans"]} math spans in the page, {want} in the source')
        if v['math_typeset'] != v['math_spans']: bad.append(f'{f}: only {v["math_typeset"]}/{v["math_spans"]} formulas typeset')
        if v['katex_errors']: bad.append(f'{f}: KaTeX errors: {v["katex_errors"][:3]}')
        raw = [m.group(0) for m in _RAW_MATH.finditer(v['prose'])]
        if raw: bad.append(f'{f}: untypeset math in the text: {raw[:5]}')
    assert not bad, '\n'.join(bad)

def test_no_tracebacks(site):
    bad = [f for f, v in site['visits'].items() if 'Traceback (most recent call last)' in v['text'] or v['error_outputs']]
    assert not bad, f'pages with a Python traceback or error output: {bad}'

def test_widgets_render(site):
    bad = []
    for f, v in site['visits'].items():
        if v['widget_missing']: bad.append(f'{f}: {v["widget_missing"]} widget(s) without saved state')
        n = v['widget_views']
        if not n: continue
        if site['manifest']['widget_manager']:
            if v['widget_live'] < n: bad.append(f'{f}: {v["widget_live"]}/{n} widgets rendered by the widget manager')
        elif v['widget_static_visible'] < n: bad.append(f'{f}: {v["widget_static_visible"]}/{n} static widget snapshots shown')
    assert not bad, '\n'.join(bad)

def test_public_api_documented(site):
    "Every public top-level function/class of mtp_lit has its signature and docstring on its page."
    spec = importlib.util.spec_from_file_location('mtp_lit_modidx', ROOT/'mtp_lit'/'_modidx.py')
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    bad, unbuilt = [], {}
    for modname, syms in mod.d['syms'].items():
        for sym, (doc, _) in syms.items():
            name = sym[len(modname) + 1:]
            if '.' in name or name.startswith('_'): continue
            page, _, anchor = doc.partition('#')
            info = manifest_page(site['manifest'], page)
            if info is None or info['source'] in site['manifest']['proc_errors']:
                unbuilt.setdefault(page, []).append(name); continue
            sd = next((s for s in info['showdoc'] if s['id'] == anchor), None)
            if sd is None or anchor not in site['visits'].get(page, {}).get('ids', [anchor]): bad.append(f'{sym}: no show_doc #{anchor} on {page}')
            elif not sd['signature'] or not sd['docstring']: bad.append(f'{sym}: show_doc on {page} lacks a signature or docstring')
    bad += [f'{page} not built (nbdev could not process it): {len(ns)} public names undocumented' for page, ns in unbuilt.items()]
    assert not bad, f'{len(bad)} public names not documented:\n' + '\n'.join(bad)

def test_screenshots_saved(site):
    shots = site['out']/'_screenshots'
    for f in site['visits']:
        p = shots/(f[:-5].replace('/', '__') + '.png')
        assert p.exists() and p.stat().st_size > 5000, p
