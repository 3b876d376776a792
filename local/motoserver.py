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
  not tell an access event's attested sender (docs/events.md "Access events: the access queue").

* S3 **bucket policies are evaluated as S3 evaluates them** (local/bucketpolicy.py): who is
  asking (``aws:PrincipalArn``: an assumed role's role ARN, an IAM user's ARN; the local stack's
  ``test`` key stands for the account's root user), the conditions the template's policies use
  (``ArnNotEquals`` on ``aws:PrincipalArn`` among them), and the IAM action of each object request
  (``s3:PutObjectRetention`` for a ``PUT ?retention``, ``s3:GetObject`` for a ``HEAD``), where
  moto knows no principal, takes every condition but one to hold and names every PUT
  ``s3:PutObject``: with the archive's "nobody but the archiver's role writes" statement, moto
  alone would refuse the archiver too. An explicit Deny is answered ``AccessDenied`` in S3's words
  ("… with an explicit deny in a resource-based policy"), and the server's log names the action,
  the principal and the statement (``BUCKET_POLICY_MARK``). A statement it cannot evaluate
  (another operator or condition key, ``NotPrincipal``, a policy variable) is refused with
  ``NotImplemented`` rather than judged wrongly.

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


# How the server logs a request a bucket policy refused: "<mark> <action> on <resource> for
# <principal> by <statement>".
BUCKET_POLICY_MARK = "motoserver: bucket policy refused:"
S3_RESPONSE_NAMES = ("key_response", "bucket_response", "_key_response", "parse_key_name",
                     "parse_bucket_name_from_url")


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
    import moto.iam.models as iam_models
    import moto.s3.models as s3_models
    import moto.s3.responses as s3_responses
    _require(s3_responses.S3Response, S3_RESPONSE_NAMES, "moto.s3.responses.S3Response")
    _require(s3_models.FakeBucket, ("get_permission",), "moto.s3.models.FakeBucket")
    _require(sts_models.STSBackend, ("get_assumed_role_from_access_key",), "moto.sts.models.STSBackend")
    _require(iam_models.IAMBackend, ("get_user_from_access_key_id",), "moto.iam.models.IAMBackend")
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

    _patch_bucket_policies(s3_models, s3_responses, sts_models, iam_models)


def _patch_bucket_policies(s3_models, s3_responses, sts_models, iam_models) -> None:
    """S3 bucket policies evaluated with the request's principal, conditions and IAM action
    (module docstring; local/bucketpolicy.py)."""
    from urllib.parse import parse_qs, urlparse

    from moto.iam.access_control import PermissionResult
    from moto.s3.exceptions import S3ClientError
    from moto.utilities.utils import get_partition

    from local import bucketpolicy

    asking = threading.local()  # the request being answered on this thread (one per request)

    def who(response, request, query) -> tuple[str | None, str, str | None]:
        """aws:PrincipalArn, the principal's account and aws:username of the request."""
        account = response.current_account
        partition = get_partition(getattr(response, "region", None) or "us-east-1")
        key = bucketpolicy.access_key_of(dict(request.headers), query)
        if key is None:
            return None, account, None
        role = sts_models.sts_backends[account][partition].get_assumed_role_from_access_key(key)
        if role is not None:
            return role.role_arn, role.account_id, None
        user = iam_models.iam_backends[account][partition].get_user_from_access_key_id(key)
        if user is not None:
            return user.arn, user.account_id, user.name
        return f"arn:{partition}:iam::{account}:root", account, None  # moto's default key: the root

    def entering(fn, objects: bool):
        @functools.wraps(fn)
        def wrapper(self, request, full_url, headers, *args, **kwargs):
            query = parse_qs(urlparse(full_url).query, keep_blank_values=True)
            try:
                self.setup_class(request, full_url, headers)
                principal, account, username = who(self, request, query)
                action = bucketpolicy.object_action(request.method, query, dict(request.headers)) \
                    if objects else None
                if_none_match = next((v for k, v in request.headers.items() if k.lower() == "if-none-match"),
                                     None) if objects else None
                asking.request = (principal, account, username, action, if_none_match)
            except Exception:  # noqa: BLE001 - moto answers a malformed request itself
                asking.request = None
            try:
                return fn(self, request, full_url, headers, *args, **kwargs)
            finally:
                asking.request = None

        return wrapper

    def get_permission(self, action: str, resource: str):
        if self.policy is None:
            return PermissionResult.NEUTRAL
        principal, account, username, exact, if_none_match = getattr(asking, "request", None) or (
            None, self.account_id, None, None, None)
        # moto names an object request after its HTTP method (s3:PutObject for every PUT,
        # s3:HeadObject for a HEAD); the object request's IAM action is known exactly.
        request = bucketpolicy.Request(action=exact or action, resource=resource, principal_arn=principal,
                                       account_id=account, username=username, if_none_match=if_none_match)
        try:
            decision, statement = bucketpolicy.evaluate(self.policy, request)
        except bucketpolicy.UnsupportedPolicy as e:
            raise S3ClientError("NotImplemented", f"the local stack cannot evaluate the bucket policy of "
                                                  f"{self.name}: {e} (local/bucketpolicy.py)")
        if decision is bucketpolicy.Decision.DENIED:
            print(f"{BUCKET_POLICY_MARK} {request.action} on {resource} for {principal or 'anonymous'} "
                  f"by {statement}", file=sys.stderr, flush=True)
            if exact is not None:  # an object request: S3's own answer (DeleteObjects lists it per key)
                raise S3ClientError("AccessDenied", f"User: {principal or 'anonymous'} is not authorized to "
                                                    f"perform: {request.action} on resource: \"{resource}\" "
                                                    f"with an explicit deny in a resource-based policy")
            return PermissionResult.DENIED
        if decision is bucketpolicy.Decision.ALLOWED:
            return PermissionResult.PERMITTED
        return PermissionResult.NEUTRAL

    s3_responses.S3Response.key_response = entering(s3_responses.S3Response.key_response, objects=True)
    s3_responses.S3Response.bucket_response = entering(s3_responses.S3Response.bucket_response, objects=False)
    s3_models.FakeBucket.get_permission = get_permission


def main() -> None:
    patch()
    from moto.server import main as moto_main

    moto_main(sys.argv[1:])


if __name__ == "__main__":
    main()
