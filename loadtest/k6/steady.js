// steady: RATE requests per second for DURATION of mixed traffic: new
// orders, the first delivery of each order's paid event, and that event's
// retries on a provider-like schedule. Proves the answers stay right under
// sustained load (201, then `processed`, then `duplicate` every time) and
// measures latency per kind of request against p95/p99 bounds.
import exec from 'k6/execution';
import {
  audit,
  createProduct,
  envInt,
  envString,
  eventBody,
  latency,
  orderOf,
  postOrder,
  primeMetrics,
  recordAnswer,
  recordCallback,
  runId,
  sendCallback,
  summaryOutputs,
  withDefaults,
} from './lib/sekali.js';

const SCENARIO = 'steady';
const RATE = envInt('RATE', 50); // iterations (one request each) per second
const DURATION = envString('DURATION', '10s');
const VUS = envInt('VUS', 20); // pre-allocated
const MAX_VUS = envInt('MAX_VUS', VUS * 5);
// Seconds after the first delivery at which the provider sends the event
// again: Standard Webhooks' "immediately, 5 s, 5 min, 30 min, ..." squeezed
// into a run of seconds. Comma-separated.
const RETRY_SCHEDULE = envString('RETRY_SCHEDULE', '0,0.5,2,5')
  .split(',')
  .map((s) => {
    const n = Number(s.trim());
    if (!(n >= 0)) {
      throw new Error(`RETRY_SCHEDULE: "${s}" is not a number of seconds`);
    }
    return n;
  });

export const options = withDefaults({
  scenarios: {
    steady: {
      executor: 'constant-arrival-rate',
      rate: RATE,
      timeUnit: '1s',
      duration: DURATION,
      preAllocatedVUs: VUS,
      maxVUs: MAX_VUS,
    },
  },
  thresholds: Object.assign(
    // Dropped iterations mean the server fell behind the rate (every VU was
    // waiting for an answer): the run did not measure what it claims.
    { dropped_iterations: ['count==0'] },
    latency('http_req_duration{kind:order}', 200, 500),
    latency('http_req_duration{kind:first}', 200, 500),
    latency('http_req_duration{kind:retry}', 200, 500),
  ),
});

export function setup() {
  primeMetrics();
  const run = runId(SCENARIO);
  // Enough stock that no order of the run is refused.
  const product = createProduct(run, { price: 75000, stock: 1000000 });
  return { run, sku: product.sku };
}

// Per-VU state: it lives as long as the VU, across iterations.
/** @type {import('./lib/sekali.js').Order[]} */
const unpaid = [];
/** @type {{at: number, id: string, body: string}[]} */
const retries = []; // sorted by `at`

/** @param {ReturnType<typeof setup>} data */
export default function (data) {
  const now = Date.now();
  const n = `${exec.vu.idInTest}-${exec.vu.iterationInScenario}`;

  if (retries.length > 0 && retries[0].at <= now) {
    const r = retries.shift();
    if (r) {
      recordCallback(sendCallback(r.id, r.body, { kind: 'retry' }), { 200: ['duplicate'] });
    }
    return;
  }

  const order = unpaid.shift();
  if (order) {
    const id = `evt-${data.run}-${n}`;
    const body = eventBody(id, {
      order_id: order.id,
      transaction_id: `tx-${data.run}-${n}`,
      payment_status: 'paid',
      paid_amount: order.total_amount,
      currency: order.currency,
    });
    const result = recordCallback(sendCallback(id, body, { kind: 'first' }), { 200: ['processed'] });
    if (result === 'processed') {
      for (const delay of RETRY_SCHEDULE) {
        retries.push({ at: Date.now() + delay * 1000, id, body });
      }
      retries.sort((x, y) => x.at - y.at);
    }
    return;
  }

  const res = postOrder(`${data.run}-order-${n}`, [{ sku: data.sku, qty: 1 }], `steady-${exec.vu.idInTest}@example.com`, { kind: 'order' });
  recordAnswer(res, res.status === 201, 'order');
  if (res.status === 201) {
    unpaid.push(orderOf(res));
  }
}

export function teardown() {
  audit();
}

/** @param {import('./lib/sekali.js').SummaryData} data */
export function handleSummary(data) {
  return summaryOutputs(SCENARIO, data, { RATE, DURATION, VUS, MAX_VUS, RETRY_SCHEDULE: RETRY_SCHEDULE.join(',') });
}
