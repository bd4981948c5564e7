"""Every widget a notebook's outputs show has its state saved in the notebook's metadata (tools/site/widget_state.py):
without it the docs site shows an empty box there. A second's check of what tests/test_site.py finds in the built site."""
import json, sys
from pathlib import Path

ROOT = Path(__file__).parent.parent
sys.path.insert(0, str(ROOT / 'tools' / 'site'))
from widget_state import WIDGET_STATE, viewed_models  # noqa: E402


def test_widget_views_have_saved_state():
    bad = []
    for nb in sorted((ROOT / 'nbs').glob('*.ipynb')):
        d = json.loads(nb.read_text())
        state = ((d['metadata'].get('widgets') or {}).get(WIDGET_STATE) or {}).get('state', {})
        if missing := [m for m in viewed_models(d) if m not in state]:
            bad.append(f"{nb.name}: {len(missing)} widget view(s) without saved state: rerun it with tools/site/widget_state.py")
    assert not bad, '\n'.join(bad)
