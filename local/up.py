"""`make local-up`: the whole local stack, left running until Ctrl-C.

moto_server on 127.0.0.1 with the table (and its stream and tags), the queues and the buckets of
template.yaml, its KMS key AuditDigestKey and the functions' roles; audit-receiver, running as
its role, behind the local SQS triggers of AuditQueue and AuditAccessQueue; audit-archiver
behind the local stream trigger and the local seal schedule (every 5 s: the template's
SealDigests, rate(5 minutes), scaled down), which seals a digest of every 15-second period.
Writes `.local/stack.env` (shell KEY=value lines: AWS_ENDPOINT_URL, AWS_REGION, TABLE_NAME,
AUDIT_QUEUE_URL, ACCESS_QUEUE_URL, DEAD_LETTER_QUEUE_URL, ARCHIVE_BUCKET, DIGEST_KEY_ID,
ATTESTATION_KEY_ID, DIGEST_PERIOD_SECONDS, WITNESS_KEY, and test credentials) so that `auditctl`, `make sql` and any AWS
client can reach it, and removes it when it stops. After each seal run the local witness (its key
made once in .local/witness/) checks and cosigns the new checkpoints: `auditctl witness --state
.local/witness/state.json --key .local/witness/key`, logged to the work dir's witness.log.

    python -m local.up [--work-dir DIR] [--env-file PATH]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from local import procs
from local.harness import LocalSystem

ROOT = Path(__file__).resolve().parent.parent
STACK_ENV = ROOT / ".local" / "stack.env"
# The local witness's key (made once, kept) and state (local/witness.py).
WITNESS_DIR = ROOT / ".local" / "witness"
# The local queue's visibility timeout, as `make demo`'s: a failed record returns in seconds.
VISIBILITY_TIMEOUT = 2
# The archiver's batching window, scaled down from the template's minute: the archive follows
# within seconds.
ARCHIVE_BATCHING_WINDOW = 2


def _sigterm(*_):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work-dir", default=str(ROOT / ".local" / "up"), help="logs go here")
    ap.add_argument("--env-file", default=str(STACK_ENV))
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, _sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    env_file = Path(args.env_file)
    system = LocalSystem(Path(args.work_dir), visibility_timeout=VISIBILITY_TIMEOUT, archiver=True, ocsf_writer=True,
                         archive_batching_window=ARCHIVE_BATCHING_WINDOW, witness_dir=WITNESS_DIR)
    try:
        print("Starting moto_server, the stack, audit-receiver, audit-archiver and audit-ocsf-writer"
              " (cargo lambda watch); the first run compiles them.", flush=True)
        system.start()
        system.write_stack_env(env_file)
        print(f"Up: AWS endpoint {system.endpoint}. {os.path.relpath(env_file, Path.cwd())}:", flush=True)
        print(env_file.read_text(), flush=True)
        print(f"Use it with:  set -a; . {os.path.relpath(env_file, Path.cwd())}; set +a; "
              "target/debug/auditctl query --from ... --to ...", flush=True)
        print(f"Digests of every {system.digest_period} s period are sealed under digest/ "
              f"(schedule: {system.stack.scaled.get(system.stack.schedule.name, {}).get('local', '?')}).",
              flush=True)
        if system.witness_key:
            print(f"The local witness ({os.path.relpath(WITNESS_DIR, Path.cwd())}/) cosigns each new checkpoint "
                  f"after each seal run; its public key is WITNESS_KEY.", flush=True)
        print(f"Logs in {os.path.relpath(args.work_dir, Path.cwd())}/. Ctrl-C stops everything.", flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 0
    finally:
        env_file.unlink(missing_ok=True)
        system.stop()
        procs.stop_all()


if __name__ == "__main__":
    sys.exit(main())
