"""An offline character-level tokenizer, for tiny models built from a config (tests, the CPU example).

Real runs use the model's own Hugging Face tokenizer; this one needs no files and no network. `save_pretrained`
writes it as a `transformers` fast tokenizer (same ids, a chat template that renders contexts as `render_context`
does without one), so `AutoTokenizer.from_pretrained` loads a run's final/ folder back: what `bench --model hf:`
and a second `train rl` need.
"""

from __future__ import annotations

import string

SPECIALS = ("<pad>", "<eos>", "<unk>")

# the plain rendering of `musacoder.rl.rollout.render_context` as a chat template: contents concatenated, each
# assistant message followed by a newline
PLAIN_CHAT_TEMPLATE = ("{% for m in messages %}{{ m['content'] }}{% if m['role'] == 'assistant' %}{{ '\\n' }}"
                       "{% endif %}{% endfor %}")


class CharTokenizer:
    """One token per character of `charset`, plus `<pad>` (0), `<eos>` (1) and `<unk>` (2)."""

    chat_template = None  # no chat template: contexts are rendered as plain text

    def __init__(self, charset: str = string.printable):
        chars = list(dict.fromkeys(charset))
        self.itos = list(SPECIALS) + chars
        self.stoi = {c: i for i, c in enumerate(self.itos)}
        self.pad_token_id, self.eos_token_id, self.unk_token_id = 0, 1, 2

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [self.stoi.get(c, self.unk_token_id) for c in text]

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        out = []
        for i in ids:
            i = int(i)
            if i < len(SPECIALS):
                if not skip_special_tokens:
                    out.append(self.itos[i])
                continue
            out.append(self.itos[i])
        return "".join(out)

    def to_hf(self):
        """The same tokenizer as a `transformers.PreTrainedTokenizerFast`: one token per character (same ids,
        unknown characters -> `<unk>`), decoding without separators, and `PLAIN_CHAT_TEMPLATE`."""
        from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
        from transformers import PreTrainedTokenizerFast

        tok = Tokenizer(models.WordLevel(vocab=dict(self.stoi), unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")  # every character alone
        tok.decoder = decoders.Fuse()
        # split_special_tokens: text that spells "<eos>" is characters, as CharTokenizer.encode reads it
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>",
                                       split_special_tokens=True)
        fast.chat_template = PLAIN_CHAT_TEMPLATE
        return fast

    def save_pretrained(self, path) -> tuple[str, ...]:
        """Write the tokenizer files `AutoTokenizer.from_pretrained(path)` loads (see `to_hf`)."""
        return self.to_hf().save_pretrained(str(path))
