"""Token accounting: how many tokens each caption costs, and how much a text encoder's window
would cut off ("token waste", the share of tokens past the window).

Two tokenizers, both offline: open_clip's CLIP BPE (its vocabulary ships in the wheel) and a
long-context tokenizer read from a local ``tokenizer.json`` (any Hugging Face fast tokenizer,
for example BioClinical ModernBERT's, copied next to the weights), never from a hub.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

WINDOWS = (77, 154, 256, 512)


@lru_cache(maxsize=1)
def _clip():  # type: ignore[no-untyped-def]
    from open_clip.tokenizer import SimpleTokenizer

    return SimpleTokenizer()


@lru_cache(maxsize=4)
def _long(path: str):  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer

    return Tokenizer.from_file(path)


def clip_tokens(text: str) -> int:
    """CLIP BPE tokens including the start and end tokens, as open_clip counts them."""
    return len(_clip().encode(text)) + 2


def long_tokens(text: str, tokenizer_json: str | Path) -> int:
    return len(_long(str(tokenizer_json)).encode(text).ids)


@dataclass
class TokenCounts:
    clip: int
    long: int | None = None


def count(text: str, tokenizer_json: str | Path | None = None) -> TokenCounts:
    return TokenCounts(
        clip_tokens(text), long_tokens(text, tokenizer_json) if tokenizer_json else None
    )


def token_waste(lengths: Iterable[int], windows: Sequence[int] = WINDOWS) -> dict[int, float]:
    """For each window size, the share of all tokens that fall beyond it (0 when none do)."""
    lengths = list(lengths)
    total = sum(lengths)
    return {w: (sum(max(0, n - w) for n in lengths) / total if total else 0.0) for w in windows}
