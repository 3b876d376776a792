// The TypeScript peer: the same job as benches/peer/handler.py, written the way the Powertools for
// AWS Lambda (TypeScript) documentation suggests.
//
// Plain JavaScript (an ES module) on purpose: this is what a Powertools TypeScript handler compiles
// to (tsc/esbuild only strip the types), so the benchmark runs it with no compile step.
//
// Powertools' BatchProcessor (partial batch responses) with one AWS SDK v3 conditional PutItem per
// record, ALL_OLD on condition failure, duplicate vs conflict by payload. Unlike the Python peer,
// the records of a batch are processed concurrently: BatchProcessor + processPartialResponse run
// every record handler at once and await them with Promise.all. That is the library's default in
// v2 (BasePartialProcessor.process(): `this.options?.processInParallel ?? true`); passing
// `{ processInParallel: false }` in processPartialResponse's options makes it sequential. The SDK's
// default NodeHttpHandler caps this at 50 sockets per origin (keep-alive agent, maxSockets 50), so
// a batch of 1,000 records keeps up to 50 PutItems in flight and queues the rest in the agent.
//
// The client is built once, at module load, with the SDK's defaults (3 attempts, standard retry
// mode, as the Python peer configures boto3): region from AWS_REGION, endpoint from
// AWS_ENDPOINT_URL (SDK v3 reads AWS_ENDPOINT_URL_DYNAMODB, then AWS_ENDPOINT_URL: see
// @smithy/core's getEndpointUrlConfig), credentials from the environment.
import {
  BatchProcessor,
  EventType,
  processPartialResponse,
} from '@aws-lambda-powertools/batch';
import {
  ConditionalCheckFailedException,
  DynamoDBClient,
  PutItemCommand,
} from '@aws-sdk/client-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';

const TABLE = process.env.TABLE_NAME;
if (!TABLE) {
  throw new Error('TABLE_NAME is not set');
}
const processor = new BatchProcessor(EventType.SQS);
const client = new DynamoDBClient({});

// ISO-8601 date-time with a UTC offset: YYYY-MM-DD, 'T' or ' ', HH:MM[:SS[.fraction]], then Z,
// ±HH, ±HHMM or ±HH:MM. Python's datetime.fromisoformat (the Python peer) accepts a few more
// spellings (basic format, week dates); the batches we measure use this one.
const ISO_WITH_OFFSET =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?(?:([Zz])|([+-])(\d{2})(?::?(\d{2}))?)$/;

/** 'YYYY-MM-DDTHH:MM:SS.mmmZ' from epoch milliseconds (years 1..9999, as Python's datetime). */
function canonical(millis) {
  const moment = new Date(millis);
  const year = moment.getUTCFullYear();
  if (Number.isNaN(millis) || year < 1 || year > 9999) {
    throw new Error('audit_time_out_of_range');
  }
  return moment.toISOString();
}

function daysIn(year, month) {
  return [31, year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1];
}

/** Epoch milliseconds of an ISO-8601 date-time that carries an offset (fraction truncated to ms). */
function parseAuditTime(when) {
  if (typeof when !== 'string') {
    throw new Error('invalid auditTime');
  }
  const m = ISO_WITH_OFFSET.exec(when);
  if (!m) {
    throw new Error('audit_time_without_offset');
  }
  const [year, month, day, hour, minute] = [m[1], m[2], m[3], m[4], m[5]].map(Number);
  const second = m[6] === undefined ? 0 : Number(m[6]);
  const millis = m[7] === undefined ? 0 : Number(m[7].slice(0, 3).padEnd(3, '0'));
  if (
    year < 1 || month < 1 || month > 12 || day < 1 || day > daysIn(year, month) ||
    hour > 23 || minute > 59 || second > 59
  ) {
    throw new Error('invalid auditTime');
  }
  let offset = 0;
  if (!m[8]) {
    const hours = Number(m[10]);
    const minutes = m[11] === undefined ? 0 : Number(m[11]);
    if (hours > 23 || minutes > 59) {
      throw new Error('invalid auditTime');
    }
    offset = (m[9] === '-' ? -1 : 1) * (hours * 60 + minutes) * 60_000;
  }
  const local = new Date(0);
  local.setUTCFullYear(year, month - 1, day); // setUTCFullYear, unlike Date.UTC, keeps years 1..99
  local.setUTCHours(hour, minute, second, millis);
  return local.getTime() - offset;
}

/** Structural equality of two AttributeValues (or undefined), as Python's == on the dicts. */
function sameValue(a, b) {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (a instanceof Uint8Array || b instanceof Uint8Array) {
    return a instanceof Uint8Array && b instanceof Uint8Array &&
      a.length === b.length && a.every((x, i) => x === b[i]);
  }
  const keysA = Object.keys(a).filter((k) => a[k] !== undefined);
  const keysB = Object.keys(b).filter((k) => b[k] !== undefined);
  return keysA.length === keysB.length && keysA.every((k) => sameValue(a[k], b[k]));
}

async function recordHandler(record) {
  const body = JSON.parse(record.body);
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new Error('not_an_object');
  }
  const text = body.auditText;
  delete body.auditText;
  if (typeof text !== 'string' || !text) {
    throw new Error('invalid auditText');
  }
  const when = body.auditTime;
  delete body.auditTime;
  const sentRaw = record.attributes?.SentTimestamp;
  if (typeof sentRaw !== 'string' || !/^\d+$/.test(sentRaw)) {
    throw new Error('invalid SentTimestamp');
  }
  const sent = Number(sentRaw);
  const auditTime = when === undefined || when === null ? canonical(sent) : canonical(parseAuditTime(when));
  const messageId = body.messageId || record.messageId;
  delete body.messageId;
  if (typeof messageId !== 'string') {
    throw new Error('invalid messageId');
  }
  const item = {
    messageId: { S: messageId },
    auditTime: { S: auditTime },
    auditText: { S: text },
    sqsMessageId: { S: record.messageId },
    sentAt: { S: canonical(sent) },
    receiveCount: { N: record.attributes.ApproximateReceiveCount },
    eventSource: { S: record.eventSourceARN },
    receivedAt: { S: new Date().toISOString() },
  };
  if (Object.keys(body).length > 0) {
    // marshall gives the map's fields; JSON numbers become N via String(number). Python's peer
    // keeps the decimal text (parse_float=Decimal), so 1.0 is N "1" here and N "1.0" there, and
    // integers beyond 2^53 fail here (marshall refuses imprecise numbers) where Python stores them.
    item.extra = { M: marshall(body) };
  }
  try {
    await client.send(
      new PutItemCommand({
        TableName: TABLE,
        Item: item,
        ConditionExpression: 'attribute_not_exists(messageId)',
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
      }),
    );
  } catch (error) {
    if (!(error instanceof ConditionalCheckFailedException)) {
      throw error;
    }
    const old = error.Item ?? {};
    if (!sameValue(old.auditText, item.auditText) || !sameValue(old.extra, item.extra)) {
      throw new Error('conflict', { cause: error });
    }
  }
}

export const handler = async (event, context) =>
  processPartialResponse(event, recordHandler, processor, { context });
