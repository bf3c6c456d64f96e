# The two commands of the README: `make demo` and `make test`. Both install what they need first.
.PHONY: install demo test test-unit lint docs docs-serve bench-webhook bench-lifecycle bench-gc bench-scale

install:
	scripts/install.sh

demo: install
	.venv/bin/python scripts/demo.py

test: install lint
	scripts/run-tests.sh

# Seconds, no services: pure domain logic, deploy files, import rules.
test-unit: install lint
	scripts/run-tests.sh tests/unit

lint: install
	.venv/bin/ruff check .

# The documentation site (mkdocs.yml, docs/), strictly: a broken link or a missing page fails it (as in `make test`).
docs: install
	NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict

docs-serve: install
	NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs serve --dev-addr 127.0.0.1:8000

bench-webhook: install
	.venv/bin/python bench/webhook.py

bench-lifecycle: install
	.venv/bin/python bench/lifecycle.py

# GC: the one engine on local disk and versitygw, both runners (bench/gc/bench_gc.py), the thread runner with
# cleaning policies (inprocess_bench.py), then SSTable read speed.
bench-gc: install
	.venv/bin/python bench/gc/bench_gc.py
	.venv/bin/python bench/gc/inprocess_bench.py
	.venv/bin/python bench/gc/sstable_bench.py

# GC at scale (issue 37): full and daily runs at 100k and 1M objects, local disk and versitygw, threads and
# spark-submit on local[2] and standalone clusters of one and two workers (bench/gc/scale_bench.py); writes
# bench/results/scale.json. SCALE_ARGS narrows it, e.g. SCALE_ARGS="--stores local --sizes 100000".
bench-scale: install
	.venv/bin/python bench/gc/scale_bench.py $(SCALE_ARGS)
