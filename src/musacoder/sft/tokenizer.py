"""An offline byte-level chat tokenizer for tiny from-config models (tests, the CPU example).

Unlike `musacoder.rl.tokenizer.CharTokenizer` it is a real `transformers` tokenizer with a chat template, so it is
saved next to the weights and `AutoTokenizer.from_pretrained` loads it back: what `train rl` and `bench --model
hf:PATH` need from an SFT checkpoint. One token per byte (no merges), plus the ChatML markers and a pad token.
"""

from __future__ import annotations

IM_START, IM_END, PAD = "<|im_start|>", "<|im_end|>", "<|pad|>"

CHATML_TEMPLATE = (
    "{% for m in messages %}" + IM_START + "{{ m['role'] }}\n{{ m['content'] }}" + IM_END + "\n{% endfor %}"
    "{% if add_generation_prompt %}" + IM_START + "assistant\n{% endif %}"
)


def chat_byte_tokenizer():
    """A `PreTrainedTokenizerFast`: 256 byte tokens, `<|im_start|>`, `<|im_end|>` (= eos) and `<|pad|>`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([IM_START, IM_END, PAD])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=IM_END, pad_token=PAD)
    fast.chat_template = CHATML_TEMPLATE
    return fast
