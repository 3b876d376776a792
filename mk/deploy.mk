# Deployment: template.yaml with AWS SAM. validate and package need no AWS account;
# deploy and redrive use the caller's AWS credentials (profile, environment or SSO).
# The tools are pinned in requirements-deploy.txt and live in their own virtual environment,
# .venv-deploy (aws-sam-cli's exact boto3 pin cannot share .venv with the local stack's).

DEPLOY_VENV      ?= .venv-deploy
DEPLOY_BIN       := $(CURDIR)/$(DEPLOY_VENV)/bin
DEPLOY_STAMP     := $(DEPLOY_VENV)/.installed-$(shell cat requirements-deploy.txt | cksum | cut -d' ' -f1)
# pip 23's resolver gives up on aws-sam-cli's pins; a newer pip, pinned, resolves them.
DEPLOY_PIP       := pip==26.3
# Deployment tools first on PATH: sam runs `cargo lambda` and zig (`python3 -m ziglang`) from it.
DEPLOY_ENV       := PATH="$(DEPLOY_BIN):$$PATH" SAM_CLI_TELEMETRY=0
# validate needs a region name to load the template, never credentials.
VALIDATE_REGION  ?= us-east-1
# The security scan's checkov lives in a virtual environment of its own, .venv-scan: it pins
# boto3 older than aws-sam-cli's exact pin (requirements-scan.txt).
SCAN_VENV        ?= .venv-scan
SCAN_BIN         := $(CURDIR)/$(SCAN_VENV)/bin
SCAN_STAMP       := $(SCAN_VENV)/.installed-$(shell cat requirements-scan.txt | cksum | cut -d' ' -f1)

# Which samconfig.toml environment to use, and the stack it names (override: STACK_NAME=...).
SAM_ENV          ?= default
STACK_NAME       ?= $(shell python3 -c 'import tomllib,sys; c=tomllib.load(open("samconfig.toml","rb")).get(sys.argv[1],{}); print(next((c.get(k,{}).get("parameters",{}).get("stack_name") for k in ("deploy","global") if c.get(k,{}).get("parameters",{}).get("stack_name")),""))' $(SAM_ENV) 2>/dev/null)
# Messages per second for the dead-letter redrive; empty: as fast as it goes.
REDRIVE_RATE     ?=
# Extra options for every aws call of stack-outputs and redrive: AWS_ARGS="--profile prod --region eu-west-1".
AWS_ARGS         ?=

.PHONY: deploy-tools scan-tools scan validate package deploy redrive dlq-list stack-outputs clean-deploy

$(DEPLOY_STAMP): requirements-deploy.txt
	python3 -m venv $(DEPLOY_VENV)
	$(DEPLOY_BIN)/pip install --disable-pip-version-check -q $(DEPLOY_PIP)
	$(DEPLOY_BIN)/pip install --disable-pip-version-check -q -r requirements-deploy.txt
	echo "*" > $(DEPLOY_VENV)/.gitignore
	rm -f $(DEPLOY_VENV)/.installed-*
	touch $@

deploy-tools: $(DEPLOY_STAMP) ## install the pinned sam, cfn-lint, aws CLI into .venv-deploy

$(SCAN_STAMP): requirements-scan.txt
	python3 -m venv $(SCAN_VENV)
	$(SCAN_BIN)/pip install --disable-pip-version-check -q -r requirements-scan.txt
	echo "*" > $(SCAN_VENV)/.gitignore
	rm -f $(SCAN_VENV)/.installed-*
	touch $@

scan-tools: $(SCAN_STAMP) ## install the pinned checkov into .venv-scan

# checkov's cloudformation framework is the one that reads a SAM template (it has no `sam`
# framework): it checks each AWS::Serverless::Function as the Lambda function SAM deploys, and
# every other resource as written. Each check the template does not pass is skipped in the
# resource's Metadata (checkov: skip:) with its reason (docs/deploy.md "The security scan"); any
# other failed check fails the scan. checkov leaves out the resources whose Condition is false
# under the parameters' defaults, so the template is scanned twice: as it is, and with the
# data-event trail on (EnableDataEventTrail's default "true", in a copy). --skip-download: nothing
# is fetched, the scan runs offline. Each summary must show checks that ran: a template checkov
# could not read would pass with none.
SCAN_ALL_OPTIONS := $(SCAN_VENV)/template-all-options.yaml

scan: $(SCAN_STAMP) ## security scan of template.yaml: checkov, pinned; fails on any failed check
	@python3 -c 'import re,sys; q=chr(34); t,n=re.subn("(\n  EnableDataEventTrail:\n    Type: String\n    Default: )"+q+"false"+q, lambda m: m.group(1)+q+"true"+q, open("template.yaml").read()); n==1 or sys.exit("scan: no EnableDataEventTrail default in template.yaml"); open(sys.argv[1],"w").write(t)' $(SCAN_ALL_OPTIONS)
	@set -o pipefail; for f in template.yaml $(SCAN_ALL_OPTIONS); do \
	  echo "scan: $$f"; \
	  $(SCAN_BIN)/checkov --file $$f --framework cloudformation --skip-download --compact --quiet 2>&1 \
	    | tee $(SCAN_VENV)/last-scan.txt || exit 1; \
	  grep -qE '^Passed checks: [1-9][0-9]*, Failed checks: 0,' $(SCAN_VENV)/last-scan.txt \
	    || { echo "scan: checkov checked nothing in $$f" >&2; exit 1; }; \
	done

validate: $(DEPLOY_STAMP) scan ## lint template.yaml: cfn-lint (the defaults and local/lint_variants.py's variants), sam validate --lint and the security scan (no AWS account)
	$(DEPLOY_ENV) cfn-lint template.yaml
	$(DEPLOY_ENV) python -m local.lint_variants
	$(DEPLOY_ENV) sam validate --lint --template-file template.yaml --region $(VALIDATE_REGION)

package: $(DEPLOY_STAMP) ## sam build: each function's arm64 bootstrap in .aws-sam/build (no AWS account)
	$(DEPLOY_ENV) sam build --template-file template.yaml
	@for fn in AuditReceiverFunction AuditArchiverFunction; do \
	  f=.aws-sam/build/$$fn/bootstrap; \
	  test -x $$f || { echo "package: $$f missing" >&2; exit 1; }; \
	  python3 -c 'import sys; h=open(sys.argv[1],"rb").read(20); sys.exit(0 if h[:4]==b"\x7fELF" and int.from_bytes(h[18:20],"little")==183 else 1)' $$f \
	  || { echo "package: $$f is not an arm64 (aarch64) ELF binary" >&2; exit 1; }; \
	  echo "package: $$f is an aarch64 ELF executable ($$(du -h $$f | cut -f1))"; \
	done

deploy: package ## build, then a guided sam deploy (asks for the stack name, region, parameters)
	$(DEPLOY_ENV) sam deploy --guided --config-env $(SAM_ENV)

stack-outputs: $(DEPLOY_STAMP) ## print the deployed stack's outputs (queue URLs and ARNs, table, function)
	@test -n "$(STACK_NAME)" || { echo "no stack name: deploy first or pass STACK_NAME=..." >&2; exit 1; }
	$(DEPLOY_ENV) aws $(AWS_ARGS) cloudformation describe-stacks --stack-name "$(STACK_NAME)" \
	  --query 'Stacks[0].Outputs[].[OutputKey,OutputValue]' --output table

# The dead-letter queue is worked with auditctl (docs/auditctl.md): it keeps each message's
# identity across the redrive, where SQS's StartMessageMoveTask gives it a new message id and
# SentTimestamp. These targets only fill in the queue URLs (the access queue's too, where auditctl
# records its own access) and the table from the stack's outputs.
AUDITCTL         ?= cargo run --release --quiet --bin auditctl --
# Only this reason (REDRIVE_REASON=throttled), at most this many per second (REDRIVE_RATE=50).
REDRIVE_REASON   ?=

redrive: $(DEPLOY_STAMP) ## redrive dead-letter messages with auditctl (REDRIVE_REASON, REDRIVE_RATE); keeps their identity
	@test -n "$(STACK_NAME)" || { echo "no stack name: deploy first or pass STACK_NAME=..." >&2; exit 1; }
	@set -euo pipefail; export $(DEPLOY_ENV); \
	  out() { aws $(AWS_ARGS) cloudformation describe-stacks --stack-name "$(STACK_NAME)" \
	    --query "Stacks[0].Outputs[?OutputKey=='$$1'].OutputValue" --output text; }; \
	  DEAD_LETTER_QUEUE_URL=$$(out AuditDeadLetterQueueUrl) AUDIT_QUEUE_URL=$$(out AuditQueueUrl) \
	  ACCESS_QUEUE_URL=$$(out AuditAccessQueueUrl) TABLE_NAME=$$(out AuditMessagesTableName) \
	    $(AUDITCTL) $(AWS_ARGS) dlq redrive $(if $(REDRIVE_REASON),--reason $(REDRIVE_REASON)) $(if $(REDRIVE_RATE),--rate $(REDRIVE_RATE))

dlq-list: $(DEPLOY_STAMP) ## the dead-letter queue's messages with their reasons (auditctl dlq list)
	@test -n "$(STACK_NAME)" || { echo "no stack name: deploy first or pass STACK_NAME=..." >&2; exit 1; }
	@set -euo pipefail; export $(DEPLOY_ENV); \
	  out() { aws $(AWS_ARGS) cloudformation describe-stacks --stack-name "$(STACK_NAME)" \
	    --query "Stacks[0].Outputs[?OutputKey=='$$1'].OutputValue" --output text; }; \
	  DEAD_LETTER_QUEUE_URL=$$(out AuditDeadLetterQueueUrl) ACCESS_QUEUE_URL=$$(out AuditAccessQueueUrl) \
	  TABLE_NAME=$$(out AuditMessagesTableName) $(AUDITCTL) $(AWS_ARGS) dlq list

clean-deploy: ## remove the sam build output (.aws-sam) and the deployment tools (.venv-deploy, .venv-scan)
	rm -rf .aws-sam $(DEPLOY_VENV) $(SCAN_VENV)
