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
  computing every queue attribute (counts included) — the same answer without a scan;
* a message's ``SenderId`` is who sent it, as SQS attests it: moto gives every message the one
  constant ``AIDAIT2UOQQY3AUEKVGXU`` whoever sends it. ``SendMessage`` and ``SendMessageBatch``
  set it from the request's credentials (the access key id of its ``Authorization`` header) to
  exactly the ``UserId`` that moto's ``sts:GetCallerIdentity`` answers for the same credentials:
  an IAM user's id (``AIDA...``), an assumed role's ``<RoleId>:<session name>``, and for a key
  moto does not know (the local stack's ``test``) the fixed ``AKIAIOSFODNN7EXAMPLE``. A message
  moto moves to a dead-letter queue keeps its sender, as in SQS. Without this the function could
  not tell an access event's attested sender (SPEC "Access to the trail is itself recorded").

The patches reach into moto's private names. On a moto that lacks one of them (or whose
``receive_message`` takes other arguments), ``patch()`` raises ``MotoPatchError`` naming it and
the pinned version, and patches nothing: running unpatched would bring back the races quietly.
"""

import functools
import inspect
import sys
import threading
import time


PINNED_MOTO = "moto[server]==5.2.5"  # requirements.txt; the patches below are written for it

# The private moto names patch() replaces or wraps. Each must exist: a moto without one would
# run unpatched (racy, slow) and fail far from the cause, so patch() refuses to start instead.
SQS_LOCKED = ("send_message", "send_message_batch", "delete_message", "delete_message_batch",
              "change_message_visibility", "change_message_visibility_batch", "purge_queue",
              "get_queue_attributes", "set_queue_attributes", "create_queue", "delete_queue")
SQS_REPLACED = ("receive_message", "is_message_valid_based_on_retention_period", "get_queue")
RECEIVE_PARAMETERS = ("self", "queue_name", "count", "wait_seconds_timeout", "visibility_timeout",
                      "message_attribute_names")
DDB_LOCKED = ("put_item", "update_item", "delete_item", "transact_write_items", "batch_write_item")
# The SQS requests whose caller becomes the sender of the messages they send (SQSResponse), and
# what the sender is computed with (as GetCallerIdentity computes it).
SQS_SENDING_REQUESTS = ("send_message", "send_message_batch")


class MotoPatchError(RuntimeError):
    pass


def _require(owner, names, where: str) -> None:
    missing = [name for name in names if not hasattr(owner, name)]
    if missing:
        import moto
        raise MotoPatchError(
            f"local/motoserver.py cannot patch moto {getattr(moto, '__version__', '?')}: "
            f"{where} has no {', '.join(missing)}. The patches are written for {PINNED_MOTO} "
            f"(requirements.txt); install that version (make venv) or update the patches.")


def _locked(lock, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with lock:
            return fn(*args, **kwargs)

    return wrapper


def patch() -> None:
    """Applies every patch, or raises MotoPatchError naming what this moto lacks (and patches
    nothing)."""
    import moto.dynamodb.models as ddb_models
    import moto.sqs.models as sqs_models
    import moto.sqs.responses as sqs_responses
    import moto.sts.models as sts_models

    backend = sqs_models.SQSBackend
    ddb_backend = ddb_models.DynamoDBBackend
    _require(backend, SQS_LOCKED + SQS_REPLACED, "moto.sqs.models.SQSBackend")
    _require(sqs_models.Queue, ("wait_for_messages",), "moto.sqs.models.Queue")
    _require(sqs_models, ("unix_time_millis", "Message"), "moto.sqs.models")
    _require(ddb_backend, DDB_LOCKED, "moto.dynamodb.models.DynamoDBBackend")
    _require(sqs_responses, ("SQSResponse",), "moto.sqs.responses")
    _require(sqs_responses.SQSResponse, SQS_SENDING_REQUESTS, "moto.sqs.responses.SQSResponse")
    _require(sts_models, ("sts_backends", "STSBackend"), "moto.sts.models")
    _require(sts_models.STSBackend, ("get_caller_identity",), "moto.sts.models.STSBackend")
    # The request's access key id (BaseResponse's; current_account, partition and region are set
    # on each request as it arrives, so the class has none of them to check).
    _require(sqs_responses.SQSResponse, ("get_access_key",), "moto.sqs.responses.SQSResponse")
    _require(sqs_models.Message("probe", "probe"), ("sender_id",), "moto.sqs.models.Message")
    # The long-poll wrapper below calls moto's receive_message with these arguments, in order.
    params = list(inspect.signature(backend.receive_message).parameters)
    if params[:6] != list(RECEIVE_PARAMETERS):
        raise MotoPatchError(
            f"local/motoserver.py cannot patch moto: SQSBackend.receive_message takes {params}, "
            f"not {list(RECEIVE_PARAMETERS)} as in {PINNED_MOTO} (requirements.txt)")

    # --- SQS: the sender of a message is the request's caller ---------------------------------
    # The request sets who is sending (a thread-local: moto answers each request on one thread);
    # the backend's send_message stamps each message it creates with it. Wrapped before the lock
    # below, so the message is stamped before any receive can see it.
    sender = threading.local()

    def caller_user_id(request) -> str:
        """What sts:GetCallerIdentity answers as UserId for this request's credentials."""
        sts = sts_models.sts_backends[request.current_account][request.partition]
        return sts.get_caller_identity(request.get_access_key(), request.region)[0]

    def sending(fn):
        @functools.wraps(fn)
        def wrapper(self, *args, **kwargs):
            sender.user_id = caller_user_id(self)
            try:
                return fn(self, *args, **kwargs)
            finally:
                sender.user_id = None

        return wrapper

    for name in SQS_SENDING_REQUESTS:
        setattr(sqs_responses.SQSResponse, name, sending(getattr(sqs_responses.SQSResponse, name)))

    original_send = backend.send_message

    @functools.wraps(original_send)
    def send_message(self, *args, **kwargs):
        message = original_send(self, *args, **kwargs)
        user_id = getattr(sender, "user_id", None)
        if user_id:  # an SQS request; a send of another moto service keeps moto's constant
            message.sender_id = user_id
        return message

    backend.send_message = send_message

    # --- SQS: one lock around every operation on messages -------------------------------------
    # (moto 5.2.5 has no StartMessageMoveTask, so there is nothing of it to lock.)
    sqs_lock = threading.RLock()
    for name in SQS_LOCKED:
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
    for name in DDB_LOCKED:
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
