// Drives the TypeScript peer's handler in-process with an events file and prints its figures as
// one JSON line, with the same contract as benches/peer/bench.py.
//
// usage: node bench.mjs latency|cpu|rss|sustained ENDPOINT EVENT_FILE REPEAT
//   latency|cpu|rss: one warm call (first record), then REPEAT calls with the whole event;
//     prints the median wall and process CPU of one call and the peak RSS.
//   sustained: REPEAT is a number of seconds S; calls with the whole event back to back until S
//     seconds have passed (at least 3 calls); prints totals, throughput and the median call.
// TLS endpoints (https://...) are verified against Node's CAs plus NODE_EXTRA_CA_CERTS, which
// Node reads only at process start: set it in the environment that starts this process.
import { readFileSync } from 'node:fs';

const [scenario, endpoint, eventFile, repeatArg] = process.argv.slice(2);
const SCENARIOS = ['latency', 'cpu', 'rss', 'sustained'];
if (!SCENARIOS.includes(scenario) || !endpoint || !eventFile || !(Number(repeatArg) > 0)) {
  console.error(`usage: node bench.mjs ${SCENARIOS.join('|')} ENDPOINT EVENT_FILE REPEAT`);
  process.exit(2);
}
const repeat = Number(repeatArg);

// The endpoint must be set before the handler module builds its client.
process.env.AWS_ENDPOINT_URL = endpoint;
// The SDK warns on stderr, once per process, that releases after early 2027 need Node >= 22; the
// pinned version runs on Node 20, so keep stderr for real errors.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
const { handler } = await import('./handler.mjs');

// Enough of a Lambda context for Powertools (which only hands it to the record handler).
const context = {
  functionName: 'audit-receiver-peer-ts',
  functionVersion: '$LATEST',
  invokedFunctionArn: 'arn:aws:lambda:us-east-1:123456789012:function:audit-receiver-peer-ts',
  memoryLimitInMB: '1024',
  awsRequestId: 'bench',
  logGroupName: '/aws/lambda/audit-receiver-peer-ts',
  logStreamName: 'bench',
  callbackWaitsForEmptyEventLoop: true,
  getRemainingTimeInMillis: () => 900_000,
  done() {},
  fail() {},
  succeed() {},
};

const event = JSON.parse(readFileSync(eventFile, 'utf8'));
const records = event.Records.length;

function fail(message) {
  console.error(message);
  process.exit(1);
}

async function call(batch) {
  const response = await handler(batch, context);
  if (response.batchItemFailures.length) {
    fail(`${response.batchItemFailures.length} records failed`);
  }
}

const now = () => Number(process.hrtime.bigint()) / 1e9;
const cpuNow = () => {
  const { user, system } = process.cpuUsage(); // microseconds, the whole process
  return (user + system) / 1e6;
};
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
// This process's peak RSS (VmHWM), in MB. Not resourceUsage().maxRSS (getrusage): across fork
// and exec Linux carries the parent's RSS at the fork into it, so a peer started by a large
// benchmark process would report the benchmark's size.
const maxRssMb = () => {
  const line = readFileSync('/proc/self/status', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmHWM:'));
  if (!line) {
    throw new Error('no VmHWM in /proc/self/status');
  }
  return Number(line.split(/\s+/)[1]) / 1024; // kB
};

async function main() {
  await call({ Records: event.Records.slice(0, 1) }); // warm: connection, lazy imports, JIT
  const walls = [];
  const cpus = [];
  let result;
  if (scenario === 'sustained') {
    const started = now();
    const startedCpu = cpuNow();
    let ended = started;
    while (walls.length < 3 || ended - started < repeat) {
      const wall = now();
      await call(event);
      ended = now();
      walls.push(ended - wall);
    }
    const cpu = cpuNow() - startedCpu;
    const seconds = ended - started;
    result = {
      scenario,
      records,
      batches: walls.length,
      seconds,
      records_per_second: (records * walls.length) / seconds,
      cpu_seconds: cpu,
      batch_seconds_median: median(walls),
      max_rss_mb: maxRssMb(),
    };
  } else {
    for (let i = 0; i < repeat; i++) {
      const wall = now();
      const cpu = cpuNow();
      await call(event);
      walls.push(now() - wall);
      cpus.push(cpuNow() - cpu);
    }
    result = {
      scenario,
      records,
      seconds: median(walls),
      cpu_seconds: median(cpus),
      max_rss_mb: maxRssMb(),
    };
  }
  // Keep-alive sockets would hold the event loop open: exit once the line is written.
  process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(0));
}

const describe = (error) => `${error?.name ?? 'Error'}: ${error?.message ?? error}`;
// A batch whose every record failed throws FullBatchFailureError; name the first record's error
// too (the last line of stderr is what the benchmark reports).
main().catch((error) => {
  const first = error?.recordErrors?.[0];
  fail(first ? `${describe(error)} First: ${describe(first)}` : describe(error));
});
