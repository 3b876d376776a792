"""moto's server (the same as `moto_server`), made safe and fast under concurrent clients.

    python -m local.motoserver -H 127.0.0.1 -p 5000

moto_server answers each request on its own thread, but moto 5.2.5's in-memory backends are not
written for that. The soak (8 pollers, 100,000 messages) showed it: messages vanished from the
queue without ever being delivered, and poison disappeared after 3 or 4 receives, because
`Queue.delete_message` rebuilds the queue's message list without a lock while other threads
append to it (send) or remove from it (the move to the dead-letter queue) — an update of one is
lost. DynamoDB's conditional `PutItem` is likewise a check and a set that two threads can
interleave, where the real service is atomic. This launcher, before running moto's own server
entry point with the given arguments, patches these and nothing else:

* every SQS backend operation that reads or changes a queue's messages runs under one lock;
  `ReceiveMessage` takes it for each non-blocking pass and long-polls *outside* it, so a waiting
  receive never blocks the others (same results and timing as moto's own long poll);
* `PutItem` (and the other item writes) run under one lock, so a condition and its write are
  atomic, as in DynamoDB;
* SQS reads the clock with ``time.time() * 1000`` instead of moto's ``unix_time_millis()``, which
  builds two datetimes per call and is called twice per queued message on every send and
  receive — the same value, 15x faster with 1,000 messages queued;
* the retention check of each received message reads the queue's retention period instead of
  computing every queue attribute (counts included) — the same answer without a scan.
"""

import functools
import sys
import threading
import time


def _locked(lock, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with lock:
            return fn(*args, **kwargs)

    return wrapper


def patch() -> None:
    import moto.dynamodb.models as ddb_models
    import moto.sqs.models as sqs_models

    # --- SQS: one lock around every operation on messages -------------------------------------
    sqs_lock = threading.RLock()
    backend = sqs_models.SQSBackend
    for name in ("send_message", "send_message_batch", "delete_message", "delete_message_batch",
                 "change_message_visibility", "change_message_visibility_batch", "purge_queue",
                 "get_queue_attributes", "set_queue_attributes", "create_queue", "delete_queue",
                 "start_message_move_task"):
        if hasattr(backend, name):
            setattr(backend, name, _locked(sqs_lock, getattr(backend, name)))

    original_receive = backend.receive_message

    @functools.wraps(original_receive)
    def receive_message(self, queue_name, count, wait_seconds_timeout, visibility_timeout,
                        message_attribute_names=None):
        end = time.time() + (wait_seconds_timeout or 0)
        while True:
            with sqs_lock:
                result = original_receive(self, queue_name, count, 0, visibility_timeout, message_attribute_names)
            left = end - time.time()
            if result or left <= 0:
                return result
            # Long poll without the lock: wake when a message is sent, or re-check within 0.2 s
            # (a message in flight may become visible again).
            self.get_queue(queue_name).wait_for_messages(min(0.2, left))

    backend.receive_message = receive_message

    # --- DynamoDB: conditional writes are atomic -------------------------------------------------
    ddb_lock = threading.RLock()
    ddb_backend = ddb_models.DynamoDBBackend
    for name in ("put_item", "update_item", "delete_item", "transact_write_items", "batch_write_item"):
        if hasattr(ddb_backend, name):
            setattr(ddb_backend, name, _locked(ddb_lock, getattr(ddb_backend, name)))

    # --- SQS: a cheap clock ----------------------------------------------------------------------
    original_clock = sqs_models.unix_time_millis

    def unix_time_millis(dt=None):
        return time.time() * 1000.0 if dt is None else original_clock(dt)

    sqs_models.unix_time_millis = unix_time_millis

    # --- SQS: the retention check of each received message reads one number ------------------
    # (moto computes every queue attribute, counts included, for it: a scan per message).
    def is_message_valid_based_on_retention_period(self, queue_name, message):
        queue = self.get_queue(queue_name)
        return int(queue.message_retention_period) + message.sent_timestamp / 1000 > time.time()

    backend.is_message_valid_based_on_retention_period = is_message_valid_based_on_retention_period


def main() -> None:
    patch()
    from moto.server import main as moto_main

    moto_main(sys.argv[1:])


if __name__ == "__main__":
    main()
