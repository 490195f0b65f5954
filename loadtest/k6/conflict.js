// conflict: an event id is first used for a `pending` event, then reused
// with a different body (a `paid` event for the full amount), COPIES times,
// concurrently with COPIES resends of the original. Proves that a changed
// body under a known id is refused, never applied: 409 with result
// `conflict` as problem+json, the resends stay `duplicate`, and the order is
// still pending with its one pending payment.
import exec from 'k6/execution';
import http from 'k6/http';
import { check } from 'k6';
import {
  audit,
  callbackRequest,
  createOrders,
  createProduct,
  envInt,
  eventBody,
  getOrders,
  latency,
  primeMetrics,
  PROVIDER,
  recordCallback,
  runId,
  sendCallback,
  summaryOutputs,
  withDefaults,
} from './lib/sekali.js';

const SCENARIO = 'conflict';
const EVENTS = envInt('EVENTS', 20); // event ids, one order each
const COPIES = envInt('COPIES', 5); // conflicting deliveries (and resends) per event
const VUS = envInt('VUS', 10);

export const options = withDefaults({
  batch: 2 * COPIES,
  batchPerHost: 2 * COPIES,
  scenarios: {
    conflict: {
      executor: 'shared-iterations',
      vus: Math.min(VUS, EVENTS),
      iterations: EVENTS,
      maxDuration: '10m',
    },
  },
  thresholds: Object.assign(
    {
      result_processed: [`count==${EVENTS}`],
      result_conflict: [`count==${EVENTS * COPIES}`],
      result_duplicate: [`count==${EVENTS * COPIES}`],
    },
    latency('http_req_duration{endpoint:callback}', 500, 1000),
  ),
});

export function setup() {
  primeMetrics();
  const run = runId(SCENARIO);
  const product = createProduct(run, { price: 150000, stock: EVENTS });
  const orders = createOrders(run, EVENTS, [{ sku: product.sku, qty: 1 }]);
  return {
    events: orders.map((o, i) => {
      const tx = `tx-${run}-${i}`;
      const id = `evt-${run}-${i}`;
      // The same event saying something else: that it paid — or, for
      // Midtrans, whose key includes the status, that it is pending for
      // another amount.
      const changed = PROVIDER === 'midtrans' ? 'pending' : 'paid';
      return {
        id,
        order: o.id,
        original: eventBody(id, { order_id: o.id, transaction_id: tx, payment_status: 'pending', paid_amount: 0, currency: o.currency }),
        // It did not happen: the gateway's API is not told of it.
        changed: eventBody(id, { order_id: o.id, transaction_id: tx, payment_status: changed, paid_amount: o.total_amount, currency: o.currency }, false),
      };
    }),
  };
}

/** @param {ReturnType<typeof setup>} data */
export default function (data) {
  const ev = data.events[exec.scenario.iterationInTest % data.events.length];
  recordCallback(sendCallback(ev.id, ev.original), { 200: ['processed'] });

  const requests = [];
  for (let c = 0; c < COPIES; c++) {
    requests.push(callbackRequest(ev.id, ev.changed, { variant: 'changed' }));
    requests.push(callbackRequest(ev.id, ev.original, { variant: 'original' }));
  }
  http.batch(requests).forEach((res, i) => {
    if (i % 2 === 0) {
      recordCallback(res, { 409: ['conflict'] });
      check(res, {
        'conflict: problem+json with code conflict': (r) =>
          String(r.headers['Content-Type']).indexOf('application/problem+json') === 0 && r.json('code') === 'conflict',
      });
    } else {
      recordCallback(res, { 200: ['duplicate'] });
    }
  });

  const order = getOrders([ev.order])[0];
  check(order, {
    'conflict: the original stays (order pending, one pending payment)': (o) =>
      o.status === 'pending' && o.payments.length === 1 && o.payments[0].status === 'pending',
  });
}

export function teardown() {
  audit();
}

/** @param {import('./lib/sekali.js').SummaryData} data */
export function handleSummary(data) {
  return summaryOutputs(SCENARIO, data, { EVENTS, COPIES, VUS });
}
