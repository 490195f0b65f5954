// oversell: VUS buyers, each with their own Idempotency-Key, order one unit
// of a product that has STOCK (< VUS) units, all at once. Proves stock
// cannot be oversold: exactly STOCK answers 201 and VUS-STOCK answers
// 409 insufficient_stock, the stock is then empty, and the audit finds the
// stock movements adding up.
import exec from 'k6/execution';
import { check } from 'k6';
import {
  audit,
  createProduct,
  envInt,
  latency,
  parseObject,
  postOrder,
  primeMetrics,
  recordAnswer,
  runId,
  scenarioCounter,
  stringField,
  summaryOutputs,
  withDefaults,
} from './lib/sekali.js';

const SCENARIO = 'oversell';
const BUYERS = envInt('VUS', 50);
const STOCK = envInt('STOCK', 10);
if (STOCK >= BUYERS) {
  throw new Error(`oversell needs fewer units than buyers: STOCK=${STOCK}, VUS=${BUYERS}`);
}

const created = scenarioCounter('orders_created');
const refused = scenarioCounter('orders_refused');

export const options = withDefaults({
  scenarios: {
    // One iteration per VU, all VUs started together: a rush, not a queue.
    rush: {
      executor: 'per-vu-iterations',
      vus: BUYERS,
      iterations: 1,
      maxDuration: '5m',
    },
  },
  thresholds: Object.assign(
    {
      orders_created: [`count==${STOCK}`],
      orders_refused: [`count==${BUYERS - STOCK}`],
    },
    latency('http_req_duration{endpoint:order}', 1000, 2000),
  ),
});

export function setup() {
  primeMetrics();
  const run = runId(SCENARIO);
  const product = createProduct(run, { price: 250000, stock: STOCK });
  return { run, sku: product.sku };
}

/** @param {ReturnType<typeof setup>} data */
export default function (data) {
  const buyer = exec.vu.idInTest;
  const res = postOrder(`${data.run}-buyer-${buyer}`, [{ sku: data.sku, qty: 1 }], `buyer-${buyer}@example.com`);
  const code = stringField(parseObject(res), 'code');
  if (res.status === 201) {
    created.add(1);
  } else if (res.status === 409 && code === 'insufficient_stock') {
    refused.add(1);
  }
  recordAnswer(res, res.status === 201 || (res.status === 409 && code === 'insufficient_stock'), 'order');
}

/** @param {ReturnType<typeof setup>} data */
export function teardown(data) {
  // One more buyer: the stock must be exactly used up, not left over.
  const res = postOrder(`${data.run}-late-buyer`, [{ sku: data.sku, qty: 1 }], 'late-buyer@example.com', { endpoint: 'verify' });
  check(res, {
    'oversell: stock used up (a late order is 409 insufficient_stock)': (r) =>
      r.status === 409 && stringField(parseObject(r), 'code') === 'insufficient_stock',
  });
  audit();
}

/** @param {import('./lib/sekali.js').SummaryData} data */
export function handleSummary(data) {
  return summaryOutputs(SCENARIO, data, { VUS: BUYERS, STOCK });
}
