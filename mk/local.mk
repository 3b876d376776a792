# The local stack (local/): moto_server on 127.0.0.1, the table (with its stream), queues and
# buckets created from template.yaml, each function under its own `cargo lambda watch`, and local
# triggers that behave like Lambda's event source mappings (SQS -> audit-receiver, the table's
# stream -> audit-archiver). No AWS account, no Docker.

PYTHON        := $(VENV_BIN)/python
# End-to-end sizes (see tests/e2e/conftest.py).
E2E_MESSAGES  ?= 1000
SOAK_MESSAGES ?= 100000
SOAK_FAULTS   ?= 3
# `make e2e` runs its files side by side in this many workers (pytest-xdist), a file's tests in one
# worker, every stack on free ports of its own: most of a test is waiting on the local schedule.
E2E_WORKERS   ?= 3
PYTEST_E2E    := $(PYTHON) -m pytest -p no:cacheprovider -ra
DEMO_ARGS     ?=
# make sql QUERY=actor|actions|failures [ACTOR=...] [FROM=...] [TO=...] (RFC 3339 times)
# [SOURCE=ocsf] (the OCSF Parquet copy, docs/ocsf.md) [BYTES=1] (the bytes Athena would scan)
QUERY         ?= actions
SOURCE        ?= trail
BYTES         ?=
ACTOR         ?=
FROM          ?=
TO            ?=

.PHONY: demo e2e soak local-up sql ui-browser cost cost-measure

# `make test` runs these after the cargo tests.
TEST_EXTRA += e2e

demo: venv ## the whole system on this machine: send a mix through the queue, report what happened
	$(PYTHON) -m local.demo $(DEMO_ARGS)

local-up: venv ## start the local stack and both functions, write .local/stack.env, leave them running (Ctrl-C stops)
	$(PYTHON) -m local.up

sql: venv ## the Athena named queries on the local archive with DuckDB: make sql QUERY=actor ACTOR=alice [FROM=.. TO=..] [SOURCE=ocsf] [BYTES=1]
	$(PYTHON) -m local.sql $(QUERY) --source $(SOURCE) $(if $(BYTES),--bytes) $(if $(ACTOR),--actor '$(ACTOR)') $(if $(FROM),--from '$(FROM)') $(if $(TO),--to '$(TO)')

e2e: venv chromium ## end-to-end: >=1,000 messages through trigger and function with injected faults, and a crash
	E2E_MESSAGES=$(E2E_MESSAGES) $(PYTEST_E2E) --timeout 900 -n $(E2E_WORKERS) --dist loadfile --durations=15 tests/e2e

ui-browser: venv chromium ## the viewer (auditctl ui) in headless Chromium; screenshots in .local/e2e/<test>/screens
	$(PYTEST_E2E) --timeout 900 tests/e2e/test_ui_browser.py

soak: venv ## the long end-to-end run: 100,000 messages, 3x the faults (SOAK_MESSAGES, SOAK_FAULTS)
	E2E_MESSAGES=$(SOAK_MESSAGES) E2E_FAULT_SCALE=$(SOAK_FAULTS) E2E_DRAIN_TIMEOUT=7200 E2E_VISIBILITY_TIMEOUT=10 E2E_POLLERS=8 \
	  $(PYTEST_E2E) --timeout 10800 -s tests/e2e/test_nothing_lost.py

cost: venv ## the cost of keeping events a year, from the measured counts (bench/cost/counts.json) and dated prices
	@$(PYTHON) -m local.cost

cost-measure: venv ## re-measure bench/cost/counts.json: every AWS request of the local stack, idle, at a trickle, in batches (~10 min)
	$(PYTHON) -m local.cost_measure
