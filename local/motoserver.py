"""moto's server (the same as `moto_server`), with one speed-up for long queues.

moto 5.2.5's SQS reads the clock through ``unix_time_millis()``, which builds two datetime
objects per call, and calls it twice per queued message for every send and receive (a scan of
the queue). With thousands of messages queued that dominates. This launcher replaces it, in
``moto.sqs.models`` only, by ``time.time() * 1000`` — the same value (milliseconds since the
epoch, as a float) — and then runs moto's own server entry point with the given arguments.

    python -m local.motoserver -H 127.0.0.1 -p 5000
"""

import sys
import time


def main() -> None:
    import moto.sqs.models as sqs_models
    from moto.server import main as moto_main

    original = sqs_models.unix_time_millis

    def unix_time_millis(dt=None):
        return time.time() * 1000.0 if dt is None else original(dt)

    sqs_models.unix_time_millis = unix_time_millis
    moto_main(sys.argv[1:])


if __name__ == "__main__":
    main()
