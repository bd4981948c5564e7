"""`mtp_lit.draft_vocab` against the vLLM code it feeds: the `mtp-lit draft-vocab` console path, vLLM's choice of
weight files for a sharded checkpoint, and vLLM's `draft_id_to_target_id` convention (`LocalArgmaxMixin`)."""
import glob, json, os
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file

from mtp_lit.ckpt_io import read_index, write_checkpoint
from mtp_lit.draft_vocab import (DRAFT_VOCAB_FILE, build_draft_vocab, d2t_offsets, load_draft_vocab,
                                 rank_draft_vocab)
from mtp_lit.model import build_random_checkpoint, byte_tokenizer, qwen3_5_config

SMALL = dict(vocab_size=320, hidden_size=64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
             head_dim=32, intermediate_size=64)


@pytest.fixture()
def ckpt(tmp_path):
    ck = build_random_checkpoint(tmp_path / 'ck', qwen3_5_config(**SMALL), tokenizer=byte_tokenizer())
    corpus = tmp_path / 'corpus'; corpus.mkdir()
    for i in range(5): (corpus / f'{i}.py').write_text(f'def f{i}(x):\n    return x * {i} + 1\n' * (i + 1))
    return ck, corpus


def test_console_entry_builds_and_validates(ckpt, tmp_path, capsys):
    "`mtp-lit draft-vocab` through mtp_lit.cli, with the progress bar on."
    from mtp_lit.cli import main
    ck, corpus = ckpt
    assert main(['draft-vocab', str(ck), '--corpus', str(corpus), '--size', 'V/4', '--out', str(tmp_path / 'v')]) == 0
    assert 'draft vocab K=80 of V=320' in capsys.readouterr().out
    dv = load_draft_vocab(tmp_path / 'v')
    assert dv.ids.numel() == 80 and dv.ids[0] == 0
    assert main(['draft-vocab', str(ck), '--corpus', str(corpus), '--size', 'V/4', '--out', str(tmp_path / 'v')]) == 1
    assert 'already exists' in capsys.readouterr().err


def test_vllm_picks_up_the_draft_file_of_a_sharded_checkpoint(ckpt, tmp_path):
    "vLLM loads only the files a sharded checkpoint's index lists: the draft vocab file must be among them."
    from vllm.model_executor.model_loader.weight_utils import filter_duplicate_safetensors_files
    ck, corpus = ckpt
    sh = write_checkpoint(tmp_path / 'sharded', json.loads((ck / 'config.json').read_text()), load_file(str(ck / 'model.safetensors')),
                          shards=2, files={p.name: p for p in ck.iterdir() if p.name not in ('config.json', 'model.safetensors')})
    parts = set(read_index(sh)['weight_map'].values())
    build_draft_vocab(sh, corpus, 64, progress=False)
    files = filter_duplicate_safetensors_files(glob.glob(os.path.join(sh, '*.safetensors')), str(sh), 'model.safetensors.index.json')
    assert sorted(Path(f).name for f in files) == sorted(list(parts) + [DRAFT_VOCAB_FILE])
    assert load_draft_vocab(sh).ids.numel() == 64


def test_d2t_matches_vllm_local_argmax():
    "vLLM maps a truncated draft's argmax k to `k + draft_id_to_target_id[k]`: equal to the argmax of the scattered full logits."
    from vllm.model_executor.models.interfaces import LocalArgmaxMixin
    torch.manual_seed(0)
    V, K = 1000, 100
    ids = rank_draft_vocab(torch.randint(0, 50, (V,)), K)
    sub = torch.randn(16, K)                                   # logits of the K-row draft head
    stub = SimpleNamespace(logits_processor=SimpleNamespace(get_top_tokens=lambda head, h: h.argmax(-1)), lm_head=None,
                           draft_id_to_target_id=d2t_offsets(ids))
    top = LocalArgmaxMixin.get_top_tokens(stub, sub)
    full = torch.full((16, V), float('-inf')); full[:, ids] = sub    # the scatter of the seed patch / EAGLE-3 compute_logits
    assert torch.equal(top, full.argmax(-1))
    assert (d2t_offsets(ids) >= 0).all() and (d2t_offsets(ids).diff() >= 0).all()


def test_nvfp4_head_rows_match_vllm_dequantisation(ckpt, tmp_path):
    """An NVFP4 LM head (uint8 codes, e4m3 group scales, a global scale; nvidia/Qwen3.6-27B-NVFP4's W4A16 lm_head): the draft
    head's rows are vLLM's own dequantisation of those rows, bit for bit."""
    from vllm.model_executor.layers.quantization.utils.nvfp4_emulation_utils import dequantize_to_dtype
    ck, corpus = ckpt
    sd = load_file(str(ck / 'model.safetensors'))
    V, H = sd['lm_head.weight'].shape
    g = torch.Generator().manual_seed(0)
    sd['lm_head.weight'] = torch.randint(0, 256, (V, H // 2), dtype=torch.uint8, generator=g)
    sd['lm_head.weight_scale'] = (torch.rand(V, H // 16, generator=g) * 4).to(torch.float8_e4m3fn)
    sd['lm_head.weight_scale_2'] = torch.tensor(0.037)
    nv = write_checkpoint(tmp_path / 'nv', json.loads((ck / 'config.json').read_text()), sd,
                          files={p.name: p for p in ck.iterdir() if p.name not in ('config.json', 'model.safetensors')})
    dv = load_draft_vocab(build_draft_vocab(nv, corpus, 64, out=tmp_path / 'nv-dv', progress=False))
    rows = load_file(str(tmp_path / 'nv-dv' / DRAFT_VOCAB_FILE))[dv.rows_name]
    want = dequantize_to_dtype(sd['lm_head.weight'][dv.ids], sd['lm_head.weight_scale'][dv.ids], sd['lm_head.weight_scale_2'],
                               torch.bfloat16, 16, swizzle=False)
    assert rows.dtype == torch.bfloat16 and torch.equal(rows, want)
