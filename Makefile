# The two commands of the README: `make demo` and `make test`. Both install what they need first.
.PHONY: install demo test bench-webhook bench-lifecycle

install:
	scripts/install.sh

demo: install
	.venv/bin/python scripts/demo.py

test: install
	scripts/run-tests.sh

bench-webhook: install
	.venv/bin/python bench/webhook.py

bench-lifecycle: install
	.venv/bin/python bench/lifecycle.py
