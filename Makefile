# Two entry points (see README.md): `make book` and `make test`. Both install what they need first.
PYTHON ?= python3
PIP := $(PYTHON) -m pip

.PHONY: install book test clean lab student

install:
	$(PIP) install -r requirements.txt
	$(PIP) install --no-deps -r requirements-nodeps.txt
	$(PIP) install --no-deps --no-build-isolation -e .

book: install
	jupyter-book build book -W -n --keep-going

test: install
	$(PYTHON) -m pytest

clean:
	rm -rf book/_build student_edition

# For teachers: the chapters with every solution replaced by a stub, in student_edition/.
student:
	$(PYTHON) scripts/make_student_edition.py --source notebooks --output student_edition

# Interactive use: JupyterLab on the chapters (project config in .jupyter/, e.g. allow_root for containers).
lab: install
	JUPYTER_CONFIG_PATH=$(CURDIR)/.jupyter jupyter lab --no-browser
