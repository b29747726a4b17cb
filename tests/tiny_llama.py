"""A Hugging Face model directory built in the test (nothing downloaded): a 2-layer Llama with
random weights and a byte-level BPE tokenizer trained on a few sentences, as
``save_pretrained`` leaves them — for the causal-LM example and for ``transformers serve``."""
from __future__ import annotations

from pathlib import Path
from typing import Any


def build_tiny_llama(out: Path, transformers: Any, sentences: list[str], *,
                     max_positions: int = 256, chat_template: str | None = None) -> Path:
    """Write the model and its tokenizer (with ``chat_template``, if given) to ``out``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(sentences, trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    bos, eos = tok.token_to_id("<s>"), tok.token_to_id("</s>")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[
        ("<s>", bos)])
    wrapped = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    if chat_template is not None:
        wrapped.chat_template = chat_template
    wrapped.save_pretrained(out)
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=max_positions, bos_token_id=bos, eos_token_id=eos,
        initializer_range=0.2)  # wide logits: no near-ties for argmax to flip on
    transformers.LlamaForCausalLM(config).eval().save_pretrained(out)
    return out
