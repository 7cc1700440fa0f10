.PHONY: install check lint test bench

install:
	python3 -m venv .venv && .venv/bin/pip install -e '.[dev]'

lint:
	.venv/bin/ruff check src tests examples
	.venv/bin/ruff format --check src tests examples
	.venv/bin/mypy

test:
	.venv/bin/python -m pytest

check: lint test

bench:
	.venv/bin/mirrorworld bench
