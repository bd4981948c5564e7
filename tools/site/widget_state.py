#!/usr/bin/env python
"""Run notebooks like tools/run_nb.py and also save their ipywidgets state, so the docs site can show the widgets.

    .venv/bin/python tools/site/widget_state.py nbs/09_draft_vocab.ipynb [more.ipynb] [--skip-flags notest]

A widget output in a notebook (`application/vnd.jupyter.widget-view+json`) is only a model id; what the widget
looks like (slider positions, the HTML/Output/Image children, their saved outputs) lives in the kernel. Jupyter
saves it in the notebook metadata (`widgets` / `application/vnd.jupyter.widget-state+json`, which nbdev_clean keeps);
execnb does not. This script executes each notebook with tools/run_nb.py's `run` and, before it is written, stores the
state of every widget its outputs show (and of the models those reference: layouts, styles, children, links) with
`ipywidgets.Widget.get_manager_state(drop_defaults=True)`. The docs renderers (Quarto, tools/site/build.py) embed it.

`add_widget_state(nb)` is the reusable part: call it on an executed notebook in the same process, before writing it.
"""
import importlib.util, json, sys
from pathlib import Path

WIDGET_STATE = 'application/vnd.jupyter.widget-state+json'
WIDGET_VIEW = 'application/vnd.jupyter.widget-view+json'

def _refs(x, acc):
    "Model ids referenced (`IPY_MODEL_<id>`) anywhere in a widget's state."
    if isinstance(x, str) and x.startswith('IPY_MODEL_'): acc.add(x[len('IPY_MODEL_'):])
    elif isinstance(x, dict): [_refs(v, acc) for v in x.values()]
    elif isinstance(x, (list, tuple)): [_refs(v, acc) for v in x]
    return acc

def viewed_models(nb) -> list:
    "Model ids of the widget views in the outputs of `nb` (a dict or execnb notebook)."
    ids = []
    for c in nb['cells']:
        for o in c.get('outputs', []) or []:
            v = (o.get('data') or {}).get(WIDGET_VIEW)
            if v and v.get('model_id'): ids.append(v['model_id'])
    return ids

def add_widget_state(nb, manager_state: dict | None = None) -> dict:
    """Store in `nb.metadata['widgets']` the state of the widgets shown by `nb`'s outputs and all models they reference;
    `manager_state` defaults to this process's `Widget.get_manager_state(drop_defaults=True)`. Returns the stored state.
    State already saved in `nb`'s metadata is kept for views not re-run (cells skipped with `--skip-flags`).
    Raises ValueError naming the model ids shown in outputs whose state is in neither."""
    if manager_state is None:
        from ipywidgets import Widget
        manager_state = Widget.get_manager_state(drop_defaults=True)
    md = nb.setdefault('metadata', {})
    old = ((md.get('widgets') or {}).get(WIDGET_STATE) or {}).get('state', {})  # outputs kept from an earlier run
    allst = {**old, **manager_state.get('state', {})}
    todo, keep = list(viewed_models(nb)), {}
    missing = [m for m in todo if m not in allst]
    if missing: raise ValueError(f'widget views {missing} have no state in this process (were they created in another run?)')
    while todo:
        m = todo.pop()
        if m in keep or m not in allst: continue
        keep[m] = allst[m]; todo += sorted(_refs(allst[m].get('state', {}), set()))
    # Links (`jslink`/`jsdlink`) are referenced by no view, and are not saved: their state has a `source` key, which
    # execnb's nb2dict (used by nbdev's docs processing, so by nbdev_docs and tools/site/build.py alike) takes for
    # cell source and crashes on. Views that switch without a kernel: Tab/Accordion, which need no link.
    links = [m for m, v in allst.items() if v.get('model_name') in ('LinkModel', 'DirectionalLinkModel')
             and _refs(v.get('state', {}), set()) & set(keep)]
    if links: print(f'widget_state: {len(links)} jslink/jsdlink model(s) not saved (nbdev cannot process them); '
                    'switch views with Tab/Accordion instead', file=sys.stderr)
    state = {'state': keep, 'version_major': manager_state.get('version_major', 2), 'version_minor': manager_state.get('version_minor', 0)}
    if keep: md['widgets'] = {WIDGET_STATE: state}
    else: md.pop('widgets', None)
    return state

def _run_nb_module():
    p = Path(__file__).resolve().parent.parent/'run_nb.py'
    spec = importlib.util.spec_from_file_location('mtp_lit_run_nb', p)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod); return mod

if __name__ == '__main__':
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0]); ap.add_argument('nbs', nargs='+')
    ap.add_argument('--skip-flags', default='', help='as tools/run_nb.py: cells with these flags keep their old outputs')
    a = ap.parse_args(); skip = [f for f in a.skip_flags.split(',') if f]
    run_nb = _run_nb_module(); write = run_nb.write_nb
    from execnb.nbio import nb2dict
    def write_with_state(nb, path):
        # the state goes into a plain dict, which execnb's writer dumps as is (its nb2dict would walk into the state)
        old = nb.metadata.pop('widgets', None)
        nb = nb2dict(nb)
        if old: nb['metadata']['widgets'] = json.loads(json.dumps(old))
        st = add_widget_state(nb); print(f'{Path(path).name}: saved the state of {len(st["state"])} widget models'); write(nb, path)
    run_nb.write_nb = write_with_state
    ok = all([run_nb.run(p, skip) for p in a.nbs]); sys.exit(0 if ok else 1)
