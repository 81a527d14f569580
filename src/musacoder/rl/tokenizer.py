"""An offline character-level tokenizer, for tiny models built from a config (tests, the CPU example).

Real runs use the model's own Hugging Face tokenizer; this one needs no files and no network.
"""

from __future__ import annotations

import string

SPECIALS = ("<pad>", "<eos>", "<unk>")


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
