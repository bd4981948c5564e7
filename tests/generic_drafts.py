"""Tiny configs of the MTP draft classes vLLM registers that mtp_lit has no family row for (issue 18): each built by vLLM's own
draft loader with `MTP_FP8=1` and a draft window where the class takes one, with `--load-format dummy`, without an engine, as
cases of `tests/test_bad_inputs.py`'s one loader process (`bad_inputs.load_drafts`).

`TINY_CONFIGS` maps the registry key of the draft class to the TARGET model's config.json (hidden size 64, one target layer,
vocab 4096, 4 experts where MoE): vLLM's `SpeculativeConfig.hf_config_override` turns it into the draft's config as it does
for a real checkpoint. `tiny_generic(key, dst)` writes it with the embedded checkpoint's tokenizer files and no weights.
"""
import json
from pathlib import Path

V, H = 4096, 64
ROPE = {'rope_type': 'default', 'rope_theta': 10000.0}
BASE = dict(vocab_size=V, hidden_size=H, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
            head_dim=32, hidden_act='silu', max_position_embeddings=512, rms_norm_eps=1e-6, tie_word_embeddings=False,
            num_nextn_predict_layers=1, bos_token_id=0, eos_token_id=0, pad_token_id=0, torch_dtype='bfloat16', rope_parameters=ROPE)
MOE = dict(num_experts=4, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, n_shared_experts=1, num_shared_experts=1,
           first_k_dense_replace=0, moe_layer_freq=1, n_group=1, topk_group=1, norm_topk_prob=True, routed_scaling_factor=1.0)
MLA_DIMS = dict(q_lora_rank=32, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=16, v_head_dim=16)
BAILING = dict(use_bias=False, use_qkv_bias=False, moe_shared_expert_intermediate_size=32, layer_group_size=1, attention_type='mla',
               score_function='sigmoid', moe_router_enable_expert_bias=True, use_qk_norm=True, q_lora_rank=32, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=16, v_head_dim=16)


def _cfg(arch, model_type, moe=False, **kw) -> dict:
    return {'architectures': [arch], 'model_type': model_type, **BASE, **(MOE if moe else {}), **kw}


TINY_CONFIGS = {
    'ExaoneMoeMTP': _cfg('ExaoneMoeForCausalLM', 'exaone_moe', True, layer_types=['full_attention'], mlp_layer_types=['sparse'],
                         sliding_window=4096),
    'LongCatFlashMTPModel': _cfg('LongcatFlashForCausalLM', 'longcat_flash', True, num_layers=1, ffn_hidden_size=128, q_lora_rank=32,
                                 kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=16, v_head_dim=16, moe_topk=2,
                                 zero_expert_num=0, expert_ffn_hidden_size=32,
                                 mla_scale_q_lora=True, mla_scale_kv_lora=True),
    'MiMoV2MTPModel': _cfg('MiMoV2FlashForCausalLM', 'mimo_v2_flash', True, head_dim=32, v_head_dim=32, sliding_window=64,
                           layer_types=['full_attention'], mlp_layer_types=['sparse'], swa_head_dim=32, swa_v_head_dim=32,
                           swa_num_attention_heads=2, swa_num_key_value_heads=1, layernorm_epsilon=1e-6, attention_bias=False),
    'NemotronHMTPModel': _cfg('NemotronHForCausalLM', 'nemotron_h', True, layers_block_type=['attention'],
                              mtp_layers_block_type=['attention'], mtp_hybrid_override_pattern='*', hybrid_override_pattern='*',
                              mlp_hidden_act='relu2', layer_norm_epsilon=1e-5, moe_shared_expert_intermediate_size=32,
                              mamba_num_heads=2, mamba_head_dim=32, ssm_state_size=16, n_groups=1),
    # Step3p5Config cuts layer_types to num_hidden_layers, so the MTP layer (index num_hidden_layers) must have none
    'Step3p5MTP': _cfg('Step3p5ForCausalLM', 'step3p5', True, moe_num_experts=4, moe_top_k=2, share_expert_dim=32, moe_layers_enum='1',
                       num_attention_groups=1, max_seq_len=512, rope_theta=10000.0, swiglu_limits=[0] * 4, swiglu_limits_shared=[0] * 4,
                       use_rope_layers=[True] * 4, partial_rotary_factors=[1.0] * 4),
    'HYV4MTPModel': _cfg('HYV4ForCausalLM', 'hy_v4', True, **MLA_DIMS),
    'DeepSeekV4MTPModel': _cfg('DeepseekV4ForCausalLM', 'deepseek_v4', True, **MLA_DIMS, hc_mult=2, hc_eps=1e-6, hc_sinkhorn_iters=2,
                               index_topk=8, num_hash_layers=0, swiglu_limit=0.0, compress_rope_theta=10000.0),
    'DeepseekV32MTPModel': _cfg('DeepseekV32ForCausalLM', 'deepseek_v32', True, **MLA_DIMS, index_topk=8, index_n_heads=2, index_head_dim=32),
    'Dots3NoteMTPModel': _cfg('Dots3NoteForCausalLM', 'dots3_note', True, **MLA_DIMS, layer_types=['full_attention']),
    'InklingMTPModel': _cfg('InklingForCausalLM', 'inkling_model', True, **MLA_DIMS, mtp_config={'num_nextn_predict_layers': 1}),
    # its layers read a nested text_config (defaults: hidden 2048, 512 experts), so the tiny sizes go there too
    'Qwen4ExpMTP': _cfg('Qwen4ExpForCausalLM', 'qwen4_exp', True, **MLA_DIMS, hc_count=2,
                        text_config={**BASE, **MOE, 'model_type': 'qwen4_exp_text', 'shared_expert_intermediate_size': 32, 'hc_count': 2,
                                     'layer_types': ['full_attention']}),
    'MiniMaxM3MTP': _cfg('MiniMaxM3MTP', 'minimax_m3_mtp', True, **MLA_DIMS, num_mtp_modules=1, hidden_act='swigluoai', moe_layer_freq=[1] * 4,
                         sparse_attention_config={'use_sparse_attention': False, 'sparse_index_dim': 32, 'sparse_num_index_heads': 1,
                                                  'sparse_topk_blocks': 2, 'sparse_block_size': 16, 'sparse_disable_index_value': [1] * 4,
                                                  'sparse_score_type': 'max', 'sparse_init_block': 0, 'sparse_local_block': 1,
                                                  'sparse_attention_freq': [0] * 4}),
    'OpenPanguMTPModel': _cfg('PanguUltraMoEForCausalLM', 'pangu_ultra_moe', True, q_lora_rank=32, kv_lora_rank=32,
                              qk_nope_head_dim=16, qk_rope_head_dim=16, v_head_dim=16),
    'BailingMoeV25MTPModel': _cfg('BailingMoeV2_5ForCausalLM', 'bailing_hybrid', True, **BAILING),
    'BailingMoeV3MTPModel': _cfg('BailingMoeV3ForCausalLM', 'bailing_moe_v3', True, **BAILING, rope_theta=10000.0,
                                 short_conv_kernel_size=4),
    'MiMoV2OmniMTPModel': {},   # MiMoV2MTPModel's config, the Omni target (below)
    'Exaone4_5_MTP': {'architectures': ['Exaone4_5_ForConditionalGeneration'], 'model_type': 'exaone4_5', **BASE,
                      'text_config': {**BASE, 'model_type': 'exaone4', 'sliding_window': 4096, 'layer_types': ['full_attention']}},
    'GlmOcrMTPModel': {'architectures': ['GlmOcrForConditionalGeneration'], 'model_type': 'glm_ocr', 'tie_word_embeddings': False,
                       'torch_dtype': 'bfloat16', 'num_nextn_predict_layers': 1,
                       'text_config': {**BASE, 'model_type': 'glm_ocr_text', 'partial_rotary_factor': 0.5}},
    'InternS2MobiusMTP': {'architectures': ['InternS2MobiusForConditionalGeneration'], 'model_type': 'interns2_mobius',
                          'tie_word_embeddings': False, 'torch_dtype': 'bfloat16', 'image_token_id': V - 4, 'video_token_id': V - 3,
                          'vision_start_token_id': V - 2, 'vision_end_token_id': V - 1,
                          'text_config': {**BASE, 'model_type': 'qwen3_5_moe_text', 'mtp_num_hidden_layers': 1, 'num_experts': 4,
                                          'num_experts_per_tok': 2, 'mtp_num_experts': 4, 'mtp_num_experts_per_tok': 2,
                                          'moe_intermediate_size': 32, 'shared_expert_intermediate_size': 32, 'attn_output_gate': True,
                                          'attention_bias': False, 'layer_types': ['full_attention'], 'full_attention_interval': 1,
                                          'linear_conv_kernel_dim': 4, 'linear_key_head_dim': 32, 'linear_num_key_heads': 1,
                                          'linear_num_value_heads': 1, 'linear_value_head_dim': 32,
                                          'rope_parameters': {**ROPE, 'partial_rotary_factor': 0.25}},
                          'vision_config': {'model_type': 'qwen3_5_vision', 'depth': 1, 'hidden_size': 64, 'intermediate_size': 128,
                                            'num_heads': 1, 'in_channels': 3, 'patch_size': 16, 'spatial_merge_size': 2,
                                            'temporal_patch_size': 2, 'out_hidden_size': H, 'num_position_embeddings': 64,
                                            'hidden_act': 'gelu_pytorch_tanh'}},
    'Gemma4MTPModel': {'architectures': ['Gemma4ForCausalLM'], 'model_type': 'gemma4_text', **BASE, 'hidden_activation': 'gelu_pytorch_tanh',
                       'layer_types': ['full_attention'], 'sliding_window': 64, 'global_head_dim': 32, 'hidden_size_per_layer_input': 0,
                       'vocab_size_per_layer_input': 0},
    'KimiK3MTPModel': {'architectures': ['KimiK3ForConditionalGeneration'], 'model_type': 'kimi_k3', 'torch_dtype': 'bfloat16',
                       'text_config': {**BASE, **MOE, **MLA_DIMS, 'model_type': 'kimi_linear', 'num_experts_per_token': 2,
                                       'linear_attn_config': {'full_attn_layers': [1], 'kda_layers': [], 'head_dim': 32, 'num_heads': 2,
                                                              'short_conv_kernel_size': 4}},
                       'vision_config': {'vt_num_attention_heads': 1, 'vt_num_hidden_layers': 1, 'vt_hidden_size': 64,
                                         'vt_intermediate_size': 128}},
    'Glm5NextMTPModel': {'architectures': ['Glm5NextForCausalLM'], 'model_type': 'glm5_next', **BASE, **MOE,
                         'num_attention_heads': 2, 'num_key_value_heads': 2, 'q_lora_rank': 32, 'kv_lora_rank': 32, 'qk_nope_head_dim': 32,
                         'qk_rope_head_dim': 0, 'v_head_dim': 32, 'index_topk': 16, 'index_head_dim': 32, 'index_n_heads': 2,
                         'index_kpool': 2, 'layer_types': ['indexed_attention'], 'mlp_layer_types': ['sparse'], 'mhc': False,
                         'mla_use_nope': True, 'swiglu_limit': 10.0, 'indexer_rope_interleave': False,
                         'scoring_func': 'sigmoid', 'topk_method': 'noaux_tc'},
}
# Gemma4's MTP draft is a separate assistant checkpoint (`gemma4_assistant`, its own config.json) beside the target:
# `tiny_generic` writes it under `assistant/`, the speculative config's model (`engine_args`)
ASSISTANT = {'Gemma4MTPModel': {'architectures': ['Gemma4AssistantForCausalLM'], 'model_type': 'gemma4_assistant', 'backbone_hidden_size': H,
                                'tie_word_embeddings': True, 'torch_dtype': 'bfloat16',
                                'text_config': {**BASE, 'model_type': 'gemma4_text', 'hidden_activation': 'gelu_pytorch_tanh',
                                                'layer_types': ['full_attention'], 'sliding_window': 64, 'global_head_dim': 32,
                                                'hidden_size_per_layer_input': 0, 'vocab_size_per_layer_input': 0, 'num_kv_shared_layers': 1,
                                                'tie_word_embeddings': True}}}
# no draft window: mtp_lit refuses it (MLA attention, Inkling's attention that is not vLLM's plain Attention layer, MiniMax-M3's sparse
# attention: `MINIMAX_WINDOW`)
MLA = {'LongCatFlashMTPModel', 'OpenPanguMTPModel', 'BailingMoeV25MTPModel', 'BailingMoeV3MTPModel', 'HYV4MTPModel', 'DeepseekV32MTPModel',
       'InklingMTPModel', 'MiniMaxM3MTP', 'KimiK3MTPModel', 'Glm5NextMTPModel'}
# classes that do not build, with the clear error each raises (they stay UNPROVEN in `mtp_lit.plugin.PROOFS`):
REFUSED = {
    # vLLM's CPU build of DeepSeek-V4 has a stub MTP class
    'DeepSeekV4MTPModel': r"^NotImplementedError: DeepSeek-V4 speculative decoding \(MTP\) is not implemented on CPU\.$",
    # its indexer (sparse) attention needs CUDA ops
    'DeepseekV32MTPModel': r"^NotImplementedError: Sparse Attention is not supported on CPU\.$",
    # vLLM cannot inspect the target architecture on CPU (its implementation imports the NVIDIA/ROCm modules only)
    'Dots3NoteMTPModel': r"Model architectures \['Dots3NoteForCausalLM'\] failed to be inspected",
    # vLLM's CPU build imports the NVIDIA implementation of Kimi-K3, whose MTP layer makes a CUDA stream for its MLA block unconditionally
    'KimiK3MTPModel': r"^RuntimeError: torch\.cuda\.Stream requires CUDA support$",
    # its MTP layer's MLA attention is indexed (sparse, `index_topk` required): CUDA ops, as DeepSeek-V3.2's
    'Glm5NextMTPModel': r"^NotImplementedError: Sparse Attention is not supported on CPU\.$",
}
TINY_CONFIGS['MiMoV2OmniMTPModel'] = {**TINY_CONFIGS['MiMoV2MTPModel'], 'architectures': ['MiMoV2OmniForCausalLM'], 'model_type': 'mimo_v2'}
REMOTE = {'MiMoV2OmniMTPModel', 'OpenPanguMTPModel', 'BailingMoeV25MTPModel', 'BailingMoeV3MTPModel', 'InternS2MobiusMTP'}   # model types transformers lacks: a config class in the directory


# Intern-S2-Mobius's config class ships with the checkpoint, its text_config a config object (vLLM's draft config rewrites its fields)
REMOTE_CODE = {'InternS2MobiusMTP': """from transformers import PretrainedConfig, Qwen3_5MoeTextConfig


class TinyConfig(PretrainedConfig):
    model_type = 'interns2_mobius'

    def __init__(self, text_config=None, vision_config=None, **kwargs):
        self.text_config = Qwen3_5MoeTextConfig(**text_config) if isinstance(text_config, dict) else text_config
        self.vision_config = vision_config
        super().__init__(**kwargs)
"""}


LM_ONLY = {'KimiK3MTPModel'}   # multimodal targets loaded with vLLM's language_model_only (no vision tower)
# vLLM reads the image processor's config of Kimi-K3 even so (its processing info, asked whether the model takes images)
PREPROCESSOR = {'KimiK3MTPModel': {'media_proc_cfg': {'merge_kernel_size': [2, 2], 'temporal_merge_kernel_size': 4, 'image_mean': [0.5] * 3,
                                                      'image_std': [0.5] * 3, 'patch_size': 14, 'in_patch_limit': 1024,
                                                      'patch_limit_on_one_side': 64, 'fixed_output_tokens': None,
                                                      'in_patch_limit_each_frame': None, 'in_patch_limit_video': None}}}


NO_WINDOW = {'Gemma4MTPModel'}   # not MLA, but no window either: its attention reads the target's KV cache (a case of its own)


def env(key) -> dict:
    "The mtp_lit options loading `key`: the FP8 draft, and a 16-token draft window unless its attention is MLA (or `NO_WINDOW`)."
    return {'MTP_FP8': '1', **({} if key in MLA | NO_WINDOW else {'MTP_DRAFT_WINDOW': '16'})}


def engine_args(key) -> dict:
    "The engine arguments loading `key`'s tiny directory: dummy weights, and remote code where the config class ships in it."
    return {'load_format': 'dummy', **({'trust_remote_code': True} if key in REMOTE else {}),
            **({'speculative_config': {'model': './assistant'}} if key in ASSISTANT else {}),
            **({'language_model_only': True} if key in LM_ONLY else {})}


def assert_built(h: dict, row: dict, windowless: bool) -> None:
    "A `bad_inputs.load_drafts` result `h` of the class of `draft_status` row `row`: mtp_lit's subclass of vLLM's class, finite, e4m3, windowed."
    assert h['loaded'] and h['class'] == f"mtp_lit.plugin.{row['class']}" and h['nonfinite'] == [], h
    assert h['bases'][0].rsplit('.', 1)[1] == row['class'] and h['bases'][0].startswith('vllm.'), h['bases']
    assert h['fp8'], h
    assert (set(h['windows']) <= {None}) if windowless else h['windows'] == [16], h   # MLA and the like: no sliding-window path


def tiny_generic(key, dst) -> Path:
    "A tiny model directory at `dst` whose MTP draft is vLLM's class `key`: `TINY_CONFIGS[key]` and tokenizer files, no weights."
    import shutil
    from mtp_lit.model import checkpoint_path
    dst = Path(dst); dst.mkdir(parents=True)
    cfg = dict(TINY_CONFIGS[key])
    if key in REMOTE:   # as the real checkpoints do: config.json names a PretrainedConfig subclass shipped beside it
        cfg['auto_map'] = {'AutoConfig': 'configuration_tiny.TinyConfig'}
        (dst / 'configuration_tiny.py').write_text(REMOTE_CODE.get(key, "from transformers import PretrainedConfig\n\n\n"
                                                   f"class TinyConfig(PretrainedConfig):\n    model_type = {cfg['model_type']!r}\n"))
    (dst / 'config.json').write_text(json.dumps(cfg, indent=1))
    for f in ('tokenizer.json', 'tokenizer_config.json', 'generation_config.json'): shutil.copy(checkpoint_path('qwen3_5-tiny') / f, dst / f)
    if key in PREPROCESSOR: (dst / 'preprocessor_config.json').write_text(json.dumps(PREPROCESSOR[key], indent=1))
    if key in ASSISTANT:
        (dst / 'assistant').mkdir()
        (dst / 'assistant' / 'config.json').write_text(json.dumps(ASSISTANT[key], indent=1))
        for f in ('tokenizer.json', 'tokenizer_config.json', 'generation_config.json'):
            shutil.copy(checkpoint_path('qwen3_5-tiny') / f, dst / 'assistant' / f)
    return dst
