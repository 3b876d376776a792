"""The peer: the same job written the way the Powertools documentation suggests.

Powertools for AWS Lambda's BatchProcessor (partial batch responses) with one boto3 conditional
put_item per record, ALL_OLD on condition failure, duplicate vs conflict by payload. Records are
processed one after another, as BatchProcessor does.
"""
import json
import os
from datetime import datetime, timezone
from decimal import Decimal

import boto3
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from boto3.dynamodb.types import TypeSerializer
from botocore.config import Config

TABLE = os.environ["TABLE_NAME"]
processor = BatchProcessor(event_type=EventType.SQS)
client = boto3.client("dynamodb", config=Config(retries={"max_attempts": 3, "mode": "standard"}))
serializer = TypeSerializer()


def canonical(moment: datetime) -> str:
    moment = moment.astimezone(timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def record_handler(record):
    body = json.loads(record.body, parse_float=Decimal)
    if not isinstance(body, dict):
        raise ValueError("not_an_object")
    text = body.pop("auditText", None)
    if not isinstance(text, str) or not text:
        raise ValueError("invalid auditText")
    when = body.pop("auditTime", None)
    sent = record.attributes.sent_timestamp
    if when is None:
        moment = datetime.fromtimestamp(int(sent) / 1000, tz=timezone.utc)
    else:
        moment = datetime.fromisoformat(when)
        if moment.tzinfo is None:
            raise ValueError("audit_time_without_offset")
    message_id = body.pop("messageId", None) or record.message_id
    item = {
        "messageId": {"S": message_id},
        "auditTime": {"S": canonical(moment)},
        "auditText": {"S": text},
        "sqsMessageId": {"S": record.message_id},
        "sentAt": {"S": canonical(datetime.fromtimestamp(int(sent) / 1000, tz=timezone.utc))},
        "receiveCount": {"N": record.attributes.approximate_receive_count},
        "eventSource": {"S": record.event_source_arn},
        "receivedAt": {"S": canonical(datetime.now(timezone.utc))},
    }
    if body:
        item["extra"] = serializer.serialize(body)
    try:
        client.put_item(
            TableName=TABLE,
            Item=item,
            ConditionExpression="attribute_not_exists(messageId)",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    except client.exceptions.ConditionalCheckFailedException as error:
        old = error.response.get("Item", {})
        if old.get("auditText") != item["auditText"] or old.get("extra") != item.get("extra"):
            raise ValueError("conflict") from error


def handler(event, context):
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
