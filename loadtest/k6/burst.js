// burst: each iteration fires COPIES identical deliveries of one new event
// at the same instant (http.batch, one connection each). Proves that
// concurrent copies of one event race on the unique key and exactly one
// wins: per burst one `processed` and COPIES-1 `duplicate`, all 200.
import exec from 'k6/execution';
import http from 'k6/http';
import { check } from 'k6';
import {
  audit,
  callbackRequest,
  checkOrders,
  envInt,
  latency,
  paidEvents,
  paidOnce,
  primeMetrics,
  recordCallback,
  runId,
  summaryOutputs,
  withDefaults,
} from './lib/sekali.js';

const SCENARIO = 'burst';
const EVENTS = envInt('EVENTS', 50); // bursts, one event (and order) each
const COPIES = envInt('COPIES', 10); // K deliveries per burst
const VUS = envInt('VUS', 10);

export const options = withDefaults({
  // k6 sends at most 6 requests of a batch to one host at once by default.
  batch: COPIES,
  batchPerHost: COPIES,
  scenarios: {
    burst: {
      executor: 'shared-iterations',
      vus: Math.min(VUS, EVENTS),
      iterations: EVENTS,
      maxDuration: '10m',
    },
  },
  thresholds: Object.assign(
    {
      result_processed: [`count==${EVENTS}`],
      result_duplicate: [`count==${EVENTS * (COPIES - 1)}`],
    },
    latency('http_req_duration{endpoint:callback}', 500, 1000),
  ),
});

export function setup() {
  primeMetrics();
  const run = runId(SCENARIO);
  const events = paidEvents(run, EVENTS, 75000);
  return { events };
}

/** @param {ReturnType<typeof setup>} data */
export default function (data) {
  const ev = data.events[exec.scenario.iterationInTest % data.events.length];
  const requests = [];
  for (let k = 0; k < COPIES; k++) {
    requests.push(callbackRequest(ev.id, ev.body));
  }
  let processed = 0;
  for (const res of http.batch(requests)) {
    if (recordCallback(res, { 200: ['processed', 'duplicate'] }) === 'processed') {
      processed++;
    }
  }
  check(processed, { 'burst: exactly one copy processed': (n) => n === 1 });
}

/** @param {ReturnType<typeof setup>} data */
export function teardown(data) {
  checkOrders(
    data.events.map((e) => e.order),
    'order paid once (paid, one succeeded payment)',
    paidOnce,
  );
  audit();
}

/** @param {import('./lib/sekali.js').SummaryData} data */
export function handleSummary(data) {
  return summaryOutputs(SCENARIO, data, { EVENTS, COPIES, VUS });
}
