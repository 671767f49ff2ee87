# Two entry points (see README.md): `make book` and `make test`. Both install what they need first.
PYTHON ?= python3
PIP := $(PYTHON) -m pip

.PHONY: install book test clean

install:
	$(PIP) install -r requirements.txt
	$(PIP) install --no-deps -r requirements-nodeps.txt
	$(PIP) install --no-deps --no-build-isolation -e .

book: install
	jupyter-book build book -W -n --keep-going

test: install
	$(PYTHON) -m pytest

clean:
	rm -rf book/_build
