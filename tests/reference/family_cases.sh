# The tiny per-family configurations shared by tests/integration/families.sh (HF
# directories) and gguf_families.sh (the same models as GGUF): sourced after the caller
# defines case_ NAME GEN_ARGS... Shapes no fixture covers: head_dim != hidden/heads, odd
# expert counts, top-1, leading dense layers, sparse steps, group-limited routing, MLA with
# and without q_lora, YaRN, GraniteMoE multipliers, llama3 rope scaling.
case_ qwen2moe-a --family qwen2_moe --seed 21 --layers 3 --hidden 64 --heads 4 --kv-heads 2 --experts 6 \
    --top-k 2 --ff 32 --dense-ff 96 --shared-ff 48 --norm-topk-prob 1 --sparse-step 2 --vocab 192
case_ qwen2moe-b --family qwen2_moe --seed 22 --layers 3 --hidden 64 --heads 4 --kv-heads 4 --experts 5 \
    --top-k 1 --ff 32 --dense-ff 64 --shared-ff 32 --mlp-only-layers 1 --vocab 160
case_ qwen3moe --family qwen3_moe --seed 23 --layers 2 --hidden 64 --heads 4 --kv-heads 2 --head-dim 24 \
    --experts 7 --top-k 3 --ff 32 --norm-topk-prob 1 --vocab 192
case_ olmoe --family olmoe --seed 24 --layers 2 --hidden 96 --heads 6 --kv-heads 3 --experts 9 --top-k 3 \
    --ff 32 --vocab 160
case_ dsv2-q --family deepseek_v2 --seed 25 --layers 3 --hidden 64 --heads 4 --experts 8 --top-k 2 --ff 32 \
    --dense-ff 96 --first-dense 1 --shared-experts 2 --q-lora-rank 48 --kv-lora-rank 32 --qk-nope 16 \
    --qk-rope 8 --v-head-dim 12 --topk-method group_limited_greedy --n-group 4 --topk-group 2 \
    --routed-scaling 1.5 --vocab 192
case_ dsv2-noq --family deepseek_v2 --seed 26 --layers 2 --hidden 64 --heads 4 --experts 6 --top-k 2 --ff 32 \
    --kv-lora-rank 24 --qk-nope 8 --qk-rope 16 --v-head-dim 16 --vocab 160
case_ dsv3 --family deepseek_v3 --seed 27 --layers 3 --hidden 64 --heads 4 --experts 8 --top-k 2 --ff 32 \
    --dense-ff 96 --first-dense 1 --shared-experts 1 --q-lora-rank 32 --kv-lora-rank 32 --qk-nope 16 \
    --qk-rope 8 --v-head-dim 16 --n-group 4 --topk-group 2 --routed-scaling 2.5 --yarn 4 \
    --mscale 1 --mscale-all-dim 1 --vocab 192
case_ granite --family granitemoe --seed 28 --layers 2 --hidden 64 --heads 4 --kv-heads 2 --experts 5 \
    --top-k 2 --ff 48 --embedding-multiplier 12 --residual-multiplier 0.22 --attention-multiplier 0.0625 \
    --logits-scaling 6 --vocab 160
case_ llama-hd --family llama --seed 29 --layers 2 --hidden 64 --heads 4 --kv-heads 1 --head-dim 24 --ff 96 \
    --vocab 160 --tie 1 --rope-scaling '{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64}' --max-pos 512
# GLM-4.5 (glm4_moe): sigmoid router with the correction bias for selection, groups, routed
# scaling, a shared expert, leading dense layers, partial rotary (half of head_dim), q/k/v
# biases, per-head q/k norm (GLM-4.5) or none (GLM-4.5-Air), a multi-token-prediction layer
# stored after the last (skipped); top-1 renormalised as Glm4MoeMoE does
case_ glm45 --family glm4_moe --seed 32 --layers 3 --hidden 64 --heads 4 --kv-heads 2 --head-dim 32 \
    --experts 8 --top-k 2 --ff 32 --dense-ff 96 --first-dense 1 --shared-experts 1 --n-group 4 --topk-group 2 \
    --routed-scaling 2.5 --qk-norm 1 --nextn 1 --vocab 192
case_ glm45-air --family glm4_moe --seed 33 --layers 2 --hidden 64 --heads 4 --kv-heads 1 --head-dim 24 \
    --experts 6 --top-k 1 --ff 32 --dense-ff 64 --first-dense 1 --shared-experts 2 --routed-scaling 1.5 \
    --partial-rotary 0.5 --nextn 1 --vocab 160
# ERNIE-4.5 MoE (ernie4_5_moe): moe_k / moe_num_experts, softmax scores with the
# moe_statics correction bias for selection, renormalised by max(sum, moe_norm_min), two
# ungated shared experts, MoE layers from moe_layer_start_index by moe_layer_interval up to
# moe_layer_end_index, rotation of adjacent pairs, tied embeddings, MTP weights skipped; a
# moe_norm_min above the top-1 probability so that the clamp decides the weight
case_ ernie45 --family ernie4_5_moe --seed 34 --layers 3 --hidden 64 --heads 4 --kv-heads 2 --head-dim 24 \
    --experts 8 --top-k 3 --ff 32 --dense-ff 96 --first-dense 1 --shared-experts 2 --tie 1 --nextn 1 \
    --rope-theta 500000 --vocab 192
case_ ernie45-step --family ernie4_5_moe --seed 35 --layers 4 --hidden 64 --heads 4 --kv-heads 4 \
    --experts 6 --top-k 1 --ff 32 --dense-ff 64 --first-dense 0 --sparse-step 2 --moe-end 2 --shared-experts 0 \
    --norm-min 0.95 --vocab 160
