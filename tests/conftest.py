"""Helpers and set-up shared by the tests.

- ``close``, ``F64``, ``rand``: the float64 comparisons that most oracle tests make.
- ``gradcheck_module``: gradcheck of a block's output in its inputs and all its parameters.
- ``torch_encoder_layer``/``torch_decoder_layer``: torch's layers with non-trivial biases and norm
  parameters, the oracles of the blocks' ``from_torch`` (copying a parameter wrongly must show).
- ``CheckerCases``, ``module_exercise_tests``, ``stub_of``, ``assert_leaves_global_random_state``:
  the tests of the book's exercise checkers (right answers pass, mistakes are named, stubs print
  "not implemented yet", the global generator is left alone); the learner's modules they run are in
  tests/chapters/learners.py.
- The ``slow`` marker (set in the root ``conftest.py`` for notebooks, browser and student-edition
  tests, and with ``@pytest.mark.slow`` on package tests that train or load weights):
  ``pytest -m "not slow"`` is the fast tier (see the README).

Import the helpers with ``from tests.conftest import close, F64`` (the repository root is on
``sys.path`` because the root ``conftest.py`` lives there).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, settings
from safetensors import safe_open
from safetensors.torch import load_file
from torch import nn

import transformer_lite as tl

F64 = torch.float64


def close(actual, expected, atol=1e-12, rtol=1e-10, msg=None) -> None:
    """``torch.testing.assert_close`` with the tight float64 tolerances of the oracle tests."""
    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol, msg=msg)


def rand(*shape, seed=0, dtype=F64) -> torch.Tensor:
    """A standard-normal tensor from its own seeded generator (the global seed is left alone)."""
    return torch.randn(*shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))


def gradcheck_module(module: nn.Module, inputs, kwargs=None, fast_mode=False) -> bool:
    """``torch.autograd.gradcheck`` of ``module(*inputs, **kwargs)[0]`` in the inputs and every parameter."""
    names = [n for n, _ in module.named_parameters()]
    params = [p.detach().clone().requires_grad_() for p in module.parameters()]
    inputs = [t.detach().clone().requires_grad_() for t in inputs]
    n = len(inputs)

    def f(*args):
        return torch.func.functional_call(
            module, dict(zip(names, args[n:])), args[:n], kwargs or {}
        )[0]

    return torch.autograd.gradcheck(f, (*inputs, *params), fast_mode=fast_mode)


def _nontrivial(layer: nn.Module) -> nn.Module:
    """Norm gains around 1 and biases around 0, not exactly 1 and 0, so that copying them is tested."""
    with torch.no_grad():
        for name, p in layer.named_parameters():
            if "norm" in name and "weight" in name:
                p.copy_(1 + 0.3 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.3 * torch.randn_like(p))
    return layer.eval()


def torch_encoder_layer(
    d_model, n_heads, d_ff, norm_first, activation="relu", seed=0, eps=1e-5, dtype=F64
):
    """A seeded ``nn.TransformerEncoderLayer`` (batch-first, dropout 0.1, eval mode) with non-trivial parameters."""
    return _torch_layer(
        nn.TransformerEncoderLayer, d_model, n_heads, d_ff, norm_first, activation, seed, eps, dtype
    )


def torch_decoder_layer(
    d_model, n_heads, d_ff, norm_first, activation="relu", seed=0, eps=1e-5, dtype=F64
):
    """A seeded ``nn.TransformerDecoderLayer`` (batch-first, dropout 0.1, eval mode) with non-trivial parameters."""
    return _torch_layer(
        nn.TransformerDecoderLayer, d_model, n_heads, d_ff, norm_first, activation, seed, eps, dtype
    )


def _torch_layer(kind, d_model, n_heads, d_ff, norm_first, activation, seed, eps, dtype):
    torch.manual_seed(seed)
    layer = kind(
        d_model,
        n_heads,
        d_ff,
        dropout=0.1,
        activation=activation,
        layer_norm_eps=eps,
        batch_first=True,
        norm_first=norm_first,
        dtype=dtype,
    )
    return _nontrivial(layer)


# --------------------------------------------------------------------------- shared by several test files
# Hypothesis settings, inputs of the attention property tests, skips for models that are not installed,
# golden files, small seeded models for the training smoke tests, and from_torch's type check.


# The built book, shared by the browser tests (tests/book/browser/) and the launch-button tests: one build per
# test run, the README's command (`jupyter-book build book -W -n --keep-going`, into book/_build/html) with
# a stand-in repository address, so that the pages carry the Binder and Colab buttons a published book has.
# Under pytest-xdist every worker asks for it: the first builds, the others wait on a lock and reuse it.
ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "book" / "_build" / "html"
STAND_IN_REPOSITORY = "https://github.com/example-org/transformer-lite-book"


@pytest.fixture(scope="session")
def site(tmp_path_factory, worker_id) -> Path:
    """The book built once per run (see above); the test session fails if the build warns or fails."""
    # a folder of this run that every worker shares (without xdist: this session's own)
    shared = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        shared = shared.parent
    with open(shared / "site.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        built = shared / "site.built"
        if not built.exists():
            subprocess.run(
                ["jupyter-book", "build", "book", "-W", "-n", "--keep-going"],
                cwd=ROOT,
                env=dict(os.environ, TL_REPOSITORY_URL=STAND_IN_REPOSITORY),
                check=True,
                stdout=subprocess.DEVNULL,
            )
            built.touch()
    assert (SITE / "index.html").is_file()
    return SITE


def reproducible(max_examples: int) -> settings:
    """Hypothesis settings of the property tests: derandomized, no example database, no deadline."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )


def make_qkv(batch, L, S, d_k, d_v, seed, dtype=F64):
    """Queries (*batch, L, d_k), keys (*batch, S, d_k), values (*batch, S, d_v) and the seeded generator
    that drew them (for the masks and perturbations that follow)."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(*batch, L, d_k, dtype=dtype, generator=gen)
    k = torch.randn(*batch, S, d_k, dtype=dtype, generator=gen)
    v = torch.randn(*batch, S, d_v, dtype=dtype, generator=gen)
    return q, k, v, gen


def missing_reason(what: str, *finders: Callable[[], object]) -> str | None:
    """Why ``what`` cannot be tested here: the first finder that raises FileNotFoundError or
    ImportError says so; None when every finder succeeds (the model is installed)."""
    try:
        for find in finders:
            find()
    except (FileNotFoundError, ImportError) as e:
        return f"{what} not available ({e})"
    return None


def skip_or_fail(reason: str) -> None:
    """Skip a test whose data package or program is missing, or fail it when the run must be complete:
    under ``make test`` (``TL_REQUIRE_ALL=1``, set by the Makefile, which installs everything first)
    and under CI (``CI`` set), a missing package is a broken install, not a reason to skip."""
    if os.environ.get("TL_REQUIRE_ALL") or os.environ.get("CI"):
        pytest.fail(f"{reason} (make test installs it; a complete run needs it)", pytrace=False)
    pytest.skip(reason)


def needs(reason: str | None) -> pytest.MarkDecorator:
    """The mark of tests that need something that may be missing: ``reason`` says what is missing, or
    is None when it is there. The root ``conftest.py`` hands a marked test to ``skip_or_fail``."""
    return pytest.mark.needs(reason)


def published_model(
    name: str, load: Callable[[], object], *finders: Callable[[], object], golden: tuple[Path, str]
):
    """``(needs_model, model, golden)`` for the tests of a published model: a ``needs`` mark for
    tests that need its files; a module-scoped fixture ``name`` returning ``load()``; and a fixture
    ``golden`` returning ``load_golden(*golden)``. The mark and the model fixture skip (or fail, see
    ``skip_or_fail``), saying why, when ``missing_reason(name, *finders)`` finds the model missing."""
    missing = missing_reason(name, *finders)

    def model():
        if missing is not None:
            skip_or_fail(missing)
        return load()

    return (
        needs(missing),
        pytest.fixture(scope="module", name=name)(model),
        pytest.fixture(scope="module", name="golden")(lambda: load_golden(*golden)),
    )


def load_golden(path: Path, metadata_key: str) -> tuple[dict[str, torch.Tensor], list]:
    """The tensors of a golden safetensors file and the JSON list stored in its metadata under key."""
    with safe_open(str(path), "pt") as f:
        inputs = json.loads(f.metadata()[metadata_key])
    return load_file(str(path)), inputs


# The small model of the training smoke tests (seeded: the parameters are drawn right after the seed).
SMALL = dict(d_model=32, n_heads=4, d_ff=64)


def small_decoder_only(vocab_size: int, max_len: int, seed: int = 0, **config):
    """A seeded ``DecoderOnlyTransformer`` of size ``SMALL`` (``config`` adds or overrides fields)."""
    torch.manual_seed(seed)
    return tl.DecoderOnlyTransformer(
        tl.DecoderOnlyConfig(vocab_size=vocab_size, max_len=max_len, **{**SMALL, **config})
    )


def small_encoder_decoder(src_vocab: int, tgt_vocab: int, seed: int = 0, **config):
    """A seeded ``EncoderDecoderTransformer`` of size ``SMALL`` without dropout (``config`` adds or
    overrides fields)."""
    torch.manual_seed(seed)
    return tl.EncoderDecoderTransformer(
        tl.EncoderDecoderConfig(src_vocab, tgt_vocab, **{**SMALL, "dropout": 0.0, **config})
    )


def assert_from_torch_rejects_wrong_type(cls, bad: nn.Module, expected: str) -> None:
    """``cls.from_torch(bad)`` raises ValueError naming the torch class it expects and the one received."""
    with pytest.raises(ValueError, match=rf"expected {expected}, received {type(bad).__name__}"):
        cls.from_torch(bad)


# --------------------------------------------------------------------------- exercise checkers


class CheckerCases:
    """Learner functions for the book's exercise checkers, each registered with what its checker must say.

    A test file makes one ``CASES = CheckerCases()``, marks each right answer with
    ``@CASES.passes(check_x)`` and each classic mistake with ``@CASES.named(check_x, "phrase")`` (the
    message must contain the phrase; ``match=`` takes a regular expression instead; ``gap=`` marks a
    known gap as a strict xfail), then collects the two tests with
    ``test_right_answers_pass, test_mistakes_are_named = CASES.tests()``. The expected message sits
    next to the mistake it names, and no file repeats the test bodies.
    """

    def __init__(self) -> None:
        self.right: list = []
        self.wrong: list = []

    def passes(self, check):
        def register(fn):
            self.right.append(pytest.param(check, fn, id=f"{check.__name__}-{fn.__name__}"))
            return fn

        return register

    def named(
        self, check, phrase: str | None = None, *, match: str | None = None, gap: str | None = None
    ):
        pattern = match if match is not None else re.escape(phrase)
        marks = pytest.mark.xfail(strict=True, reason=gap) if gap else ()

        def register(fn):
            self.wrong.append(
                pytest.param(check, fn, pattern, id=f"{check.__name__}-{fn.__name__}", marks=marks)
            )
            return fn

        return register

    def tests(self):
        """The two parametrized tests over the registered functions, for the test file to bind to names."""

        @pytest.mark.parametrize("check, fn", self.right)
        def test_right_answers_pass(check, fn, capsys):
            assert check(fn) is None
            assert f"{check.__name__}: all checks passed" in capsys.readouterr().out

        @pytest.mark.parametrize("check, fn, pattern", self.wrong)
        def test_mistakes_are_named(check, fn, pattern):
            with pytest.raises(AssertionError, match=pattern):
                check(fn)

        return test_right_answers_pass, test_mistakes_are_named


def assert_prints_not_implemented(check, capsys, *learner) -> None:
    """``check(*learner)`` prints "not implemented yet" and returns None."""
    assert check(*learner) is None
    assert f"{check.__name__}: not implemented yet" in capsys.readouterr().out


def assert_not_implemented(check, capsys, n_functions: int = 1) -> None:
    """A stub raising ``NotImplementedError`` makes ``check`` print "not implemented yet" and return None."""

    def stub(*args, **kwargs):
        raise NotImplementedError

    assert_prints_not_implemented(check, capsys, *[stub] * n_functions)


def stub_of(base: type, method: str = "forward") -> type:
    """``base`` whose ``method`` raises as the student edition's stub does."""

    def raises(self, *args, **kwargs):
        raise NotImplementedError("exercise: replace this line with your code")

    return type(f"Stub{base.__name__}", (base,), {method: raises})


def assert_leaves_global_random_state(check, *learner) -> None:
    """``check(*learner)`` leaves torch's global generator as it found it: a checker seeds its own
    generators, so that a reader's later ``torch.randn`` does not depend on having run it."""
    torch.manual_seed(123)
    before = torch.get_rng_state()
    expected = torch.rand(3)
    torch.set_rng_state(before)
    check(*learner)
    assert torch.equal(torch.get_rng_state(), before), (
        f"{check.__name__} moved the global generator"
    )
    assert torch.equal(torch.rand(3), expected)


def module_exercise_tests(stubs: list[tuple], references: list[tuple]):
    """The two tests of a chapter's module exercises, for the test file to bind to their names:
    ``test_stub_prints_not_implemented, test_checkers_leave_the_global_random_state_alone``.

    The first runs over ``stubs``, tuples ``(check, base)`` or ``(check, base, method)``:
    ``stub_of(base, method)`` (method ``forward`` by default) makes ``check`` print "not implemented
    yet", and so does a constructor that raises. The second runs
    ``assert_leaves_global_random_state`` over ``references``, tuples ``(check, cls)``. The ids are
    the names joined by "-", e.g. ``check_block_module-BlockReference``.
    """

    def named(values):  # the id: the names joined by "-"
        return "-".join(getattr(v, "__name__", v) for v in values)

    @pytest.mark.parametrize("stub", stubs, ids=named)
    def test_stub_prints_not_implemented(stub, capsys):
        check, *base_and_method = stub
        assert_prints_not_implemented(check, capsys, stub_of(*base_and_method))
        assert_not_implemented(check, capsys)  # the constructor of the student edition's stub

    @pytest.mark.parametrize("check, cls", references, ids=[named(c) for c in references])
    def test_checkers_leave_the_global_random_state_alone(check, cls):
        assert_leaves_global_random_state(check, cls)

    return test_stub_prints_not_implemented, test_checkers_leave_the_global_random_state_alone


def perturbed(make: Callable[[], nn.Module], seed: int, scale: float = 0.3) -> nn.Module:
    """``make()`` in float64 and eval mode, every parameter moved by ``scale`` times N(0, 1) noise.

    Seeds torch with ``seed`` before building, so the module and the noise are reproducible. Moving
    the parameters away from their initial values (norm gains 1, biases 0) makes a test see a norm
    or bias applied in the wrong place.
    """
    torch.manual_seed(seed)
    module = make().to(F64).eval()
    with torch.no_grad():
        for p in module.parameters():
            p.add_(scale * torch.randn_like(p))
    return module


# The ways a torch transformer layer can be given its activation (``from_torch`` must read each one).
ACTIVATIONS = {
    "relu-str": "relu",
    "relu-fn": F.relu,
    "relu-module": nn.ReLU(),
    "gelu-str": "gelu",
    "gelu-fn": F.gelu,
    "gelu-module": nn.GELU(),
}
