# Every target creates .venv on first use, so a fresh clone needs only Python 3.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BUNDLE ?= $(CURDIR)/examples/coffee-roastery
HTTP ?= 127.0.0.1:8765
# Extras installed into .venv; CI adds "semantic" (embedding search, ~1 GB with torch).
EXTRAS ?= dev

.PHONY: install run test lint bench update-goldens clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# The CPU build of torch first, so the semantic extra never pulls a multi-GB CUDA build.
	case ",$(EXTRAS)," in *,semantic,*) $(BIN)/python -m pip install --quiet torch==2.13.0 ;; esac
	$(BIN)/python -m pip install --quiet -e '.[$(EXTRAS)]'
	touch $(STAMP)

install: $(STAMP)

# Serves the example bundle over streamable HTTP and prints the client configuration.
run: $(STAMP)
	$(BIN)/bundle-mcp validate $(BUNDLE)
	$(BIN)/bundle-mcp serve $(BUNDLE) --http $(HTTP)

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check src tests bench

bench: $(STAMP)
	$(BIN)/python bench/run.py

update-goldens: $(STAMP)
	@if [ -n "$$CI" ]; then echo "update-goldens refuses to run when CI is set"; exit 1; fi
	$(BIN)/python -m tests.golden_runner --update

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache
