# The local stack (local/): moto_server on 127.0.0.1, the table and queues created from
# template.yaml, the function under `cargo lambda watch`, and a local SQS trigger that behaves
# like Lambda's event source mapping. No AWS account, no Docker.

PYTHON        := $(VENV_BIN)/python
# End-to-end sizes (see tests/e2e/conftest.py).
E2E_MESSAGES  ?= 1000
SOAK_MESSAGES ?= 100000
SOAK_FAULTS   ?= 3
PYTEST_E2E    := $(PYTHON) -m pytest -p no:cacheprovider -ra
DEMO_ARGS     ?=

.PHONY: demo e2e soak local-up

# `make test` runs these after the cargo tests.
TEST_EXTRA += e2e

demo: venv ## the whole system on this machine: send a mix through the queue, report what happened
	$(PYTHON) -m local.demo $(DEMO_ARGS)

local-up: venv ## start the local stack and the function, and leave them running (Ctrl-C stops)
	$(PYTHON) -m local.demo --serve $(DEMO_ARGS)

e2e: venv ## end-to-end: >=1,000 messages through trigger and function with injected faults, and a crash
	E2E_MESSAGES=$(E2E_MESSAGES) $(PYTEST_E2E) --timeout 900 tests/e2e

soak: venv ## the long end-to-end run: 100,000 messages, 3x the faults (SOAK_MESSAGES, SOAK_FAULTS)
	E2E_MESSAGES=$(SOAK_MESSAGES) E2E_FAULT_SCALE=$(SOAK_FAULTS) E2E_DRAIN_TIMEOUT=7200 E2E_VISIBILITY_TIMEOUT=10 E2E_POLLERS=8 \
	  $(PYTEST_E2E) --timeout 10800 -s tests/e2e/test_nothing_lost.py
