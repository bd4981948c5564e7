"""Tiny real-weight MTP checkpoints of each family (built from `mtp_lit.layouts.synth_mtp_weights`) and a vLLM probe.

Run as a script (by `tests/test_layouts_vllm.py`, one engine per process):

    python tests/layouts_vllm_probe.py FAMILY DIR [--fused]

builds a tiny checkpoint of FAMILY in DIR whose `quantization_config` is `{"quant_method": "mtp_lit_probe"}`: a quant config
registered here that quantizes nothing and records every `(prefix, layer class)` vLLM asks it about while building the
target and the draft (`model_tag` "eagle_head"). It starts vLLM 0.32 in-process with MTP, generates 4 tokens, and prints
one JSON line: the draft's prefixes and, for MoE drafts, whether each loaded routed expert holds its checkpoint values
(the loaded tensors are saved to DIR/loaded_experts.safetensors).
"""
import json, os, re
from pathlib import Path
import torch
from mtp_lit.layouts import draft_layout, synth_mtp_weights

BASE = dict(vocab_size=512, hidden_size=64, num_attention_heads=2, num_key_value_heads=1, head_dim=64, rms_norm_eps=1e-6,
            max_position_embeddings=512, eos_token_id=0, bos_token_id=0, tie_word_embeddings=False, torch_dtype='bfloat16')
FULL = dict(rope_parameters={'rope_type': 'default', 'rope_theta': 10000, 'partial_rotary_factor': 0.25}, attention_bias=False,
            attn_output_gate=True, full_attention_interval=1, hidden_act='silu', linear_conv_kernel_dim=4, linear_key_head_dim=64,
            linear_num_key_heads=2, linear_num_value_heads=2, linear_value_head_dim=64, mtp_num_hidden_layers=1, mtp_use_dedicated_embeddings=False)

def config(family, L=2):
    if family == 'qwen3_5':
        return {**BASE, **FULL, 'architectures': ['Qwen3_5ForCausalLM'], 'model_type': 'qwen3_5_text', 'num_hidden_layers': L,
                'layer_types': ['full_attention'] * L, 'intermediate_size': 128}
    if family == 'qwen3_5_moe':
        return {**BASE, **FULL, 'architectures': ['Qwen3_5MoeForCausalLM'], 'model_type': 'qwen3_5_moe_text', 'num_hidden_layers': L,
                'layer_types': ['full_attention'] * L, 'num_experts': 4, 'num_experts_per_tok': 2, 'moe_intermediate_size': 64,
                'shared_expert_intermediate_size': 64, 'mlp_only_layers': [], 'router_aux_loss_coef': 0.001}
    if family in ('deepseek_v3', 'glm4_moe_lite'):
        c = {**BASE, 'architectures': ['DeepseekV3ForCausalLM'], 'model_type': 'deepseek_v3', 'num_hidden_layers': L, 'num_nextn_predict_layers': 1,
             'hidden_act': 'silu', 'intermediate_size': 128, 'moe_intermediate_size': 64, 'n_routed_experts': 4, 'n_shared_experts': 1,
             'num_experts_per_tok': 2, 'first_k_dense_replace': 1, 'moe_layer_freq': 1, 'n_group': 1, 'topk_group': 1, 'norm_topk_prob': True,
             'routed_scaling_factor': 1.0, 'scoring_func': 'sigmoid', 'topk_method': 'noaux_tc', 'q_lora_rank': 64, 'kv_lora_rank': 512,
             'qk_nope_head_dim': 64, 'qk_rope_head_dim': 64, 'v_head_dim': 64, 'rope_theta': 10000, 'rope_scaling': None,
             'attention_bias': False, 'num_key_value_heads': 2}
        if family == 'glm4_moe_lite':
            c.update(architectures=['Glm4MoeLiteForCausalLM'], model_type='glm4_moe_lite', partial_rotary_factor=1.0)
        return c
    if family == 'mimo':
        return {**BASE, 'architectures': ['MiMoForCausalLM'], 'model_type': 'qwen2', 'num_hidden_layers': L, 'num_nextn_predict_layers': 1,
                'hidden_act': 'silu', 'intermediate_size': 128, 'attention_bias': True, 'rope_theta': 10000, 'use_sliding_window': False,
                'sliding_window': None, 'max_window_layers': L}
    raise ValueError(family)

def target_weights(cfg):
    "Names/shapes of the target's own tensors, from the MTP layer's (same decoder layer) renamed to model.layers.{j}."
    lay = draft_layout(cfg); f = lay.family; out = []
    H, V = cfg['hidden_size'], cfg['vocab_size']
    for j in range(lay.num_hidden_layers):
        if f.ckpt_layer == 'model.layers.{n}':
            ws = synth_mtp_weights({**cfg, 'num_hidden_layers': j})
            ws = [w for w in ws if not re.search(r'\.(enorm|hnorm|eh_proj|embed_tokens|shared_head)\b', w['name'])]
        else:
            src = lay.ckpt_prefix(0) + '.'
            ws = [{**w, 'name': f'model.layers.{j}.' + w['name'][len(src):]} for w in synth_mtp_weights(cfg) if w['name'].startswith(src)
                  and not re.search(r'\.(token_layernorm|hidden_layernorm|input_proj|final_layernorm)\.', w['name'])]
        out += ws
    out += [{'name': 'model.embed_tokens.weight', 'shape': [V, H], 'dtype': 'BF16'}, {'name': 'model.norm.weight', 'shape': [H], 'dtype': 'BF16'},
            {'name': 'lm_head.weight', 'shape': [V, H], 'dtype': 'BF16'}]
    return out

def tensor_for(name, shape, dtype, g):
    if len(shape) == 1:
        t = torch.zeros(shape) if 'norm' in name and 'qwen' in str(g.family) else torch.ones(shape)
        if 'bias' in name: t = torch.zeros(shape)
    else: t = torch.randn(*shape, generator=g.gen) * 0.05
    return t.to(torch.float32 if dtype == 'F32' else torch.bfloat16)

class _G:
    def __init__(self, seed, family): self.gen = torch.Generator().manual_seed(seed); self.family = family

def tokenizer_files(dst, V):
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders
    alpha = sorted(pre_tokenizers.ByteLevel.alphabet())[:min(255, V - 1)]
    vocab = {'<|endoftext|>': 0, **{c: i + 1 for i, c in enumerate(alpha)}}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[])); tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel(); tok.add_special_tokens(['<|endoftext|>']); tok.save(str(dst / 'tokenizer.json'))
    (dst / 'tokenizer_config.json').write_text(json.dumps({'tokenizer_class': 'PreTrainedTokenizerFast', 'eos_token': '<|endoftext|>', 'model_max_length': 512}))

def build(dst, cfg, experts='split', quant_config=None, seed=0, mtp_weights=None):
    "Write a loadable tiny checkpoint; MTP tensors from synth_mtp_weights(cfg, experts). Returns {name: tensor} written."
    from mtp_lit.ckpt_io import write_checkpoint
    g = _G(seed, cfg["model_type"])
    ws = target_weights(cfg) + (mtp_weights or synth_mtp_weights(cfg, experts))
    sd = {w['name']: tensor_for(w['name'], w['shape'], w['dtype'], g) for w in ws}
    c = dict(cfg)
    if quant_config: c['quantization_config'] = quant_config
    tokenizer_files(write_checkpoint(dst, c, sd), cfg['vocab_size'])
    return sd


def fused_from_split(sd, prefix, E):
    "Replace the split expert tensors under `prefix.mlp.experts.{e}` by fused `experts.gate_up_proj` [E, 2F, H] / `down_proj` [E, H, F]."
    p = f'{prefix}.mlp.experts'
    gu = torch.stack([torch.cat([sd.pop(f'{p}.{e}.gate_proj.weight'), sd.pop(f'{p}.{e}.up_proj.weight')]) for e in range(E)])
    dn = torch.stack([sd.pop(f'{p}.{e}.down_proj.weight') for e in range(E)])
    sd[f'{p}.gate_up_proj'], sd[f'{p}.down_proj'] = gu, dn
    return sd


def main():
    import sys
    family, d = sys.argv[1], Path(sys.argv[2]); fused = '--fused' in sys.argv
    os.environ.update(VLLM_CPU_KVCACHE_SPACE='1', VLLM_CPU_OMP_THREADS_BIND=os.environ.get('VLLM_CPU_OMP_THREADS_BIND', '0-1'),
                      HF_HUB_OFFLINE='1', TRANSFORMERS_OFFLINE='1', VLLM_NO_USAGE_STATS='1', VLLM_ENABLE_V1_MULTIPROCESSING='0')
    from safetensors.torch import save_file
    from vllm.model_executor.layers.quantization import register_quantization_config
    from vllm.model_executor.layers.quantization.base_config import QuantizationConfig
    from vllm.model_executor.layers.linear import LinearBase, UnquantizedLinearMethod
    import vllm.compilation.backends as backends
    seen = []

    @register_quantization_config('mtp_lit_probe')
    class Probe(QuantizationConfig):
        def get_name(self): return 'mtp_lit_probe'
        def get_supported_act_dtypes(self): return [torch.bfloat16, torch.float16, torch.float32]
        @classmethod
        def get_min_capability(cls): return 0
        @staticmethod
        def get_config_filenames(): return []
        @classmethod
        def from_config(cls, config): return cls()
        def get_quant_method(self, layer, prefix):
            seen.append((backends.model_tag, prefix, type(layer).__name__, layer))
            return UnquantizedLinearMethod() if isinstance(layer, LinearBase) else None

    cfg = config(family)
    sd = build(d, cfg, quant_config={'quant_method': 'mtp_lit_probe'})
    lay = draft_layout(cfg)
    if fused:
        sd = fused_from_split(dict(sd), lay.ckpt_prefix(0), lay.num_experts)
        save_file({k: v.contiguous() for k, v in sd.items()}, str(d / 'model.safetensors'), metadata={'format': 'pt'})
    from vllm import LLM, SamplingParams
    llm = LLM(model=str(d), dtype='bfloat16', max_model_len=256, enforce_eager=True, max_num_seqs=2, max_num_batched_tokens=256,
              seed=0, enable_prefix_caching=False, speculative_config={'method': 'mtp', 'num_speculative_tokens': 1})
    toks = llm.generate(['hello'], SamplingParams(temperature=0, max_tokens=4))[0].outputs[0].token_ids
    draft = [(p, c, layer) for tag, p, c, layer in seen if tag == 'eagle_head' and 'Attention' not in c]
    out = {'family': family, 'fused': fused, 'tokens': list(toks), 'draft': sorted({(p, c) for p, c, _ in draft}),
           'attention': sorted({p for tag, p, c, _ in seen if tag == 'eagle_head' and 'Attention' in c}), 'names': sorted(sd)}
    exp = [layer for p, c, layer in draft if c in ('RoutedExperts', 'FusedMoE')]
    if exp:   # routed experts as loaded by vLLM vs the checkpoint (split names rebuilt from either layout)
        m, p = exp[0], f'{lay.ckpt_prefix(0)}.mlp.experts'
        if fused: gu, dn = sd[f'{p}.gate_up_proj'], sd[f'{p}.down_proj']
        else:
            E = lay.num_experts
            gu = torch.stack([torch.cat([sd[f'{p}.{e}.gate_proj.weight'], sd[f'{p}.{e}.up_proj.weight']]) for e in range(E)])
            dn = torch.stack([sd[f'{p}.{e}.down_proj.weight'] for e in range(E)])
        w13, w2 = m.w13_weight.detach().float().contiguous(), m.w2_weight.detach().float().contiguous()
        # vLLM's CPU MoE method repacks the weights after loading: compare each expert's values as a multiset
        same = lambda a, b: all(torch.equal(a[e].flatten().sort().values, b[e].float().flatten().sort().values) for e in range(a.shape[0]))
        out['experts_values_per_expert_match'] = same(w13, gu) and same(w2, dn)
        out['experts_shapes'] = [list(w13.shape), list(w2.shape)]
        save_file({'w13': w13, 'w2': w2, 'gu': gu.float().contiguous(), 'dn': dn.float().contiguous()}, str(d / 'loaded_experts.safetensors'))
    print('PROBE ' + json.dumps(out), flush=True)


if __name__ == '__main__':
    main()
