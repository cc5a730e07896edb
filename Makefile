# Every target creates .venv on first use, so a fresh clone needs only Python 3.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BUNDLE ?= $(CURDIR)/examples/coffee-roastery
HTTP ?= 127.0.0.1:8765
# Extras installed into .venv; CI adds "semantic" (embedding search, ~1.4 GB with CPU torch).
EXTRAS ?= dev
# Where torch comes from with the semantic extra: empty means pip's configured index. From PyPI,
# Linux x86_64 gets the multi-GB CUDA build; set TORCH_INDEX=https://download.pytorch.org/whl/cpu
# for the CPU build (README, Install). macOS and Windows get a CPU build from PyPI.
TORCH_INDEX ?=

# The real TypeScript MCP SDK client that tests/test_ts_client.py drives (pinned in
# tests/ts/package-lock.json). Without npm, or offline, this step only says so and that test
# skips with the reason, so `make test-all` works on a machine without node.
TS_DIR := tests/ts
TS_STAMP := $(TS_DIR)/node_modules/.package-lock.json

.PHONY: install ts-deps run test test-all lint bench bench-all bench-quality update-goldens vendor-js viewer-screenshots clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch first, from TORCH_INDEX when it is set, so the extra keeps the build chosen here.
	case ",$(EXTRAS)," in *,semantic,*) $(BIN)/python -m pip install --quiet torch==2.13.0 \
		$(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) ;; esac
	$(BIN)/python -m pip install --quiet -e '.[$(EXTRAS)]'
	touch $(STAMP)

install: $(STAMP)

$(TS_STAMP): $(TS_DIR)/package.json $(TS_DIR)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		(cd $(TS_DIR) && npm ci --no-audit --no-fund --fetch-timeout=20000 --fetch-retries=1) \
		|| echo "npm ci in $(TS_DIR) failed; tests/test_ts_client.py will retry or skip"; \
	else \
		echo "npm not found: tests/test_ts_client.py will be skipped"; \
	fi

ts-deps: $(TS_STAMP)

# Serves the example bundle over streamable HTTP and prints the client configuration.
run: $(STAMP)
	$(BIN)/bundle-mcp validate $(BUNDLE)
	$(BIN)/bundle-mcp serve $(BUNDLE) --http $(HTTP)

# The fast tier for the edit-test loop: every test not marked slow (tests/conftest.py says which
# are), on every core. test-all: every test, one at a time, as .ci/run runs them.
test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" -n auto

test-all: $(STAMP) ts-deps
	$(BIN)/python -m pytest -q

# mypy reads its settings (strict, files = src/bundle_mcp) from [tool.mypy] in pyproject.toml.
lint: $(STAMP)
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/mypy

# The performance targets (issue 13): raw JSON-RPC, 1,000 and ~10,000 concepts, a table of
# met/missed with the Go reference beside it. bench-all: every loader and server section.
bench: $(STAMP)
	$(BIN)/python bench/targets.py

bench-all: $(STAMP)
	$(BIN)/python bench/run.py

# Retrieval quality on the real corpora and a generated bundle (bench/quality.py): recall@1/5,
# MRR and tokens per answer for every search tool against an rg baseline. Not part of `test`.
bench-quality: $(STAMP)
	$(BIN)/python bench/quality.py

# The JavaScript the viewer page inlines (bundle-mcp view), from the npm registry at the versions
# pinned in the script, into src/bundle_mcp/viewer/vendor/ with MANIFEST.json (name, version,
# licence, sha256). The result is committed: building and installing the package needs no npm.
vendor-js:
	$(PYTHON) scripts/vendor_viewer_js.py

# docs/viewer-bundle.png and docs/viewer-concept.png, from the example bundle at 1280x800 in
# Debian's headless Chromium (apt-get install chromium), with the date fixed.
viewer-screenshots: $(STAMP)
	$(BIN)/python scripts/viewer_screenshots.py

update-goldens: $(STAMP)
	@if [ -n "$$CI" ]; then echo "update-goldens refuses to run when CI is set"; exit 1; fi
	$(BIN)/python -m tests.golden_runner --update

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache $(TS_DIR)/node_modules
