# Two entry points (see README.md): `make book` and `make test`. Both install what they need first.
PYTHON ?= python3
PIP := $(PYTHON) -m pip

.PHONY: install lock node system book test clean lab student execute

# Every package pinned with its hash (requirements.lock, generated from requirements.in by `make lock`),
# and the JavaScript the book serves for its live models (package-lock.json: exact versions and hashes).
install: node_modules/.package-lock.json
	$(PIP) install --require-hashes -r requirements.lock
	$(PIP) install --no-deps --require-hashes -r requirements-nodeps.txt
	$(PIP) install --no-deps --no-build-isolation -e .

# onnxruntime-web and @huggingface/tokenizers, exactly as package-lock.json pins them (install scripts off,
# see .npmrc); book/_ext/live_models.py copies the few files the pages load into the built site.
node_modules/.package-lock.json: package.json package-lock.json | node
	npm ci

# System packages for the live models: Debian's nodejs and npm (npm installs the JavaScript above).
# Needs root or sudo; skipped when npm is already there.
node:
	@command -v npm >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update && apt-get install -y nodejs npm; \
	  elif command -v sudo >/dev/null 2>&1; then sudo apt-get update && sudo apt-get install -y nodejs npm; \
	  else echo "npm is missing and cannot be installed without root: apt-get install nodejs npm" >&2; exit 1; fi; }

# For maintainers, after editing requirements.in: regenerate the lock (pip-tools in its own venv;
# existing pins are kept where they still satisfy requirements.in).
lock:
	$(PYTHON) -m venv .lockenv
	.lockenv/bin/pip install pip-tools==7.5.1
	.lockenv/bin/pip-compile --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url \
	  --no-emit-find-links -o requirements.lock requirements.in

# The book renders the outputs stored in the notebooks (verified by `make test`); nothing is executed.
# The build also exports the live models to ONNX into build/live/ (scripts/export_onnx.py, about 15 s,
# only when the weights, the package or the script changed) and copies them into the site.
book: install
	jupyter-book build book -W -n --keep-going

# For authors: re-execute the chapters and store their outputs (in place), after changing a chapter
# or the package. Then `make test` checks them. One chapter: make execute NOTEBOOKS=notebooks/02_causal_masks.ipynb
# Training runs of chapters 4, 5, 6 and 8 are stored in checkpoints/ and checked, not redone
# (transformer_lite/training/stored.py); to train them all again: make execute TL_RETRAIN=1
NOTEBOOKS ?= $(sort $(wildcard notebooks/*.ipynb))
execute:
	TL_RETRAIN=$(TL_RETRAIN) $(PYTHON) -m jupyter nbconvert --to notebook --execute --inplace --ExecutePreprocessor.timeout=1800 $(NOTEBOOKS)

# System packages for the browser tests: Debian's chromium (Playwright drives it; it never
# downloads a browser of its own). Needs root or sudo; skipped when chromium is already there.
system:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update && apt-get install -y chromium; \
	  elif command -v sudo >/dev/null 2>&1; then sudo apt-get update && sudo apt-get install -y chromium; \
	  else echo "chromium is missing and cannot be installed without root: the browser tests will be skipped"; fi; }

# Every test: unit and property tests, the notebooks (nbval, each chapter executed once), the student
# edition's exercises, and the built book in a real browser. The whole run uses other ATen CPU kernels
# than `make execute` stored the outputs with (AVX2 where the machine would use AVX-512, otherwise the
# scalar ones): float results then differ in their last bits, as on another processor, and the stored
# outputs must still hold (tests/nbval_tolerance.py says how they are compared).
# Choose another: make test TEST_CPU_CAPABILITY=default
# The test files run on TEST_WORKERS processes (pytest-xdist; one thread each, so two workers keep a
# 2-core machine busy without oversubscribing it); conftest.py keeps each notebook on one worker, and the
# workers share one build of the book. TEST_WORKERS=0 runs everything in this process. TL_REQUIRE_ALL=1:
# a test whose data package is missing fails instead of skipping (everything was just installed).
# Chapter 8 fixes torch's thread count at 2 (its sums depend on it): OMP_WAIT_POLICY=PASSIVE lets its
# idle threads sleep instead of spinning against the other worker. TL_REQUIRE_STORED=1: a chapter's
# stored training run (transformer_lite/training/stored.py) that is missing or stale is an error, not
# minutes of silent retraining.
TEST_CPU_CAPABILITY ?= $(shell $(PYTHON) -c "import torch; print('avx2' if torch.backends.cpu.get_cpu_capability() == 'AVX512' else 'default')" 2>/dev/null || echo default)
TEST_WORKERS ?= 2
test: install system
	ATEN_CPU_CAPABILITY=$(TEST_CPU_CAPABILITY) OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE \
	  TL_REQUIRE_ALL=1 TL_REQUIRE_STORED=1 $(PYTHON) -m pytest -n $(TEST_WORKERS) --dist loadgroup

clean:
	rm -rf book/_build student_edition build/live grades course

# For teachers: the chapters with every solution replaced by a stub, in student_edition/.
student:
	$(PYTHON) scripts/make_student_edition.py --source notebooks --output student_edition

# For teachers: grade the students' filled-in student-edition notebooks, SUBMISSIONS/<student>/<chapter>.ipynb,
# each in its own kernel and temporary copy (scripts/grade.py): OUT/grades.csv and OUT/feedback/<student>.md.
OUT ?= grades
TIME_LIMIT ?= 300
.PHONY: grade
grade:
	@test -n "$(SUBMISSIONS)" || { echo "usage: make grade SUBMISSIONS=dir/ [OUT=grades/] [TIME_LIMIT=300]" >&2; exit 2; }
	$(PYTHON) scripts/grade.py "$(SUBMISSIONS)" --output "$(OUT)" --time-limit $(TIME_LIMIT)

# Interactive use: JupyterLab on the chapters (project config in .jupyter/, e.g. allow_root for containers).
# Students: make student && make lab LAB_DIR=student_edition (the chapters with stubs for the solutions).
LAB_DIR ?= notebooks
lab: install
	JUPYTER_CONFIG_PATH=$(CURDIR)/.jupyter jupyter lab --no-browser --ServerApp.root_dir=$(LAB_DIR)
