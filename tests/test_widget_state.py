"""Every widget a notebook's outputs show has its state saved in the notebook's metadata (tools/site/widget_state.py):
without it the docs site shows an empty box there. A second's check of what tests/test_site.py finds in the built site."""
import json
from pathlib import Path

VIEW, STATE = 'application/vnd.jupyter.widget-view+json', 'application/vnd.jupyter.widget-state+json'


def test_widget_views_have_saved_state():
    bad = []
    for nb in sorted((Path(__file__).parent.parent / 'nbs').glob('*.ipynb')):
        d = json.loads(nb.read_text())
        views = [o['data'][VIEW]['model_id'] for c in d['cells'] for o in c.get('outputs', []) if VIEW in o.get('data', {})]
        state = d['metadata'].get('widgets', {}).get(STATE, {}).get('state', {})
        if missing := [v for v in views if v not in state]:
            bad.append(f"{nb.name}: {len(missing)} widget view(s) without saved state: rerun it with tools/site/widget_state.py")
    assert not bad, '\n'.join(bad)
