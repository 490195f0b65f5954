// race: for each order, a `paid`, a `failed` and an `expired` event of one
// charge (distinct event ids, one transaction id) arrive together,
// COPIES copies of each, in ROUNDS waves. Proves that events racing for one
// order serialise: every delivery answers 200, each event is applied or
// judged stale once, the rest are duplicates, and the audit finds stock
// and payments consistent.
//
// The end state is known whatever wins: a failed or expired order releases
// its stock, and the later paid event takes it back (a late payment
// re-reserves: docs/state-machine.md#event--state), so every order ends
// `paid` with its one payment `succeeded`.
//
// Midtrans is the exception to "one charge": Sekali confirms each of its
// notifications with Midtrans's status API, which knows one state per
// transaction, so the three events of one transaction would leave two of
// them `unconfirmed`. In its format each event is a transaction of its own
// (as the Go replayer sends them), and the order ends `paid` with exactly
// one `succeeded` payment beside the others.
import exec from 'k6/execution';
import http from 'k6/http';
import { check } from 'k6';
import {
  audit,
  callbackRequest,
  checkOrders,
  createOrders,
  createProduct,
  envInt,
  eventBody,
  expressible,
  latency,
  paidOnce,
  paymentsIn,
  primeMetrics,
  PROVIDER,
  recordCallback,
  runId,
  summaryOutputs,
  withDefaults,
} from './lib/sekali.js';

const SCENARIO = 'race';
const EVENTS = envInt('EVENTS', 20); // orders, each with a paid, a failed and an expired event
const COPIES = envInt('COPIES', 4); // copies of each event per wave
const ROUNDS = envInt('ROUNDS', 2); // waves per order
const VUS = envInt('VUS', 10);

/** @type {import('./lib/sekali.js').PaymentStatus[]} */
const STATUSES = /** @type {import('./lib/sekali.js').PaymentStatus[]} */ (['paid', 'failed', 'expired']).filter(expressible); // as PROVIDER can say them
const WAVE = STATUSES.length * COPIES;

export const options = withDefaults({
  batch: WAVE,
  batchPerHost: WAVE,
  scenarios: {
    race: {
      executor: 'shared-iterations',
      vus: Math.min(VUS, EVENTS),
      iterations: EVENTS,
      maxDuration: '10m',
    },
  },
  thresholds: Object.assign(
    {
      // Each event's first delivery is processed or stale, never both.
      result_duplicate: [`count==${EVENTS * STATUSES.length * (COPIES * ROUNDS - 1)}`],
    },
    latency('http_req_duration{endpoint:callback}', 500, 1000),
  ),
});

export function setup() {
  primeMetrics();
  const run = runId(SCENARIO);
  // Two products, so re-reservation locks several rows in SKU order.
  const a = createProduct(run, { price: 100000, stock: EVENTS, label: 'A' });
  const b = createProduct(run, { price: 50000, stock: EVENTS, label: 'B' });
  const orders = createOrders(run, EVENTS, [
    { sku: a.sku, qty: 1 },
    { sku: b.sku, qty: 1 },
  ]);
  return {
    orders: orders.map((o, i) => ({
      id: o.id,
      events: STATUSES.map((status) => ({
        status,
        id: `evt-${run}-${i}-${status}`,
        body: eventBody(`evt-${run}-${i}-${status}`, {
          order_id: o.id,
          transaction_id: PROVIDER === 'midtrans' ? `tx-${run}-${i}-${status}` : `tx-${run}-${i}`,
          payment_status: status,
          paid_amount: status === 'paid' ? o.total_amount : 0,
          currency: o.currency,
        }),
      })),
    })),
  };
}

/** @param {ReturnType<typeof setup>} data */
export default function (data) {
  const order = data.orders[exec.scenario.iterationInTest % data.orders.length];
  /** @type {Record<string, number>} */
  const applied = {};
  for (let round = 0; round < ROUNDS; round++) {
    const requests = [];
    /** @type {string[]} */
    const ids = [];
    for (let c = 0; c < COPIES; c++) {
      for (const ev of order.events) {
        requests.push(callbackRequest(ev.id, ev.body));
        ids.push(ev.id);
      }
    }
    http.batch(requests).forEach((res, i) => {
      const result = recordCallback(res, { 200: ['processed', 'stale', 'duplicate'] });
      if (result === 'processed' || result === 'stale') {
        applied[ids[i]] = (applied[ids[i]] || 0) + 1;
      }
    });
  }
  check(applied, {
    'race: each event applied or judged stale exactly once': (a) => order.events.every((ev) => a[ev.id] === 1),
  });
}

/** @param {ReturnType<typeof setup>} data */
export function teardown(data) {
  checkOrders(
    data.orders.map((o) => o.id),
    'order ends paid with one succeeded payment',
    PROVIDER === 'midtrans' ? (o) => o.status === 'paid' && paymentsIn(o, 'succeeded') === 1 : paidOnce,
  );
  audit();
}

/** @param {import('./lib/sekali.js').SummaryData} data */
export function handleSummary(data) {
  return summaryOutputs(SCENARIO, data, { EVENTS, COPIES, ROUNDS, VUS });
}
