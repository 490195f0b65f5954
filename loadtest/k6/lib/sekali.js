// Shared by every Sekali scenario: configuration from __ENV, Standard
// Webhooks signing of sandbox callbacks, set-up through the admin API,
// result accounting, the audit verdict and the end-of-test summary.
import { check } from 'k6';
import { hmac, sha512 } from 'k6/crypto';
import { b64decode, b64encode } from 'k6/encoding';
import exec from 'k6/execution';
import http from 'k6/http';
import { Counter, Rate } from 'k6/metrics';

/**
 * @typedef {import('k6/http').Response} Response
 * @typedef {import('k6/http').Params} Params
 * @typedef {import('k6/http').ObjectBatchRequest} BatchRequest
 * @typedef {import('k6/options').Options} Options
 * @typedef {'paid' | 'failed' | 'expired' | 'pending'} PaymentStatus
 * @typedef {{order_id: string, transaction_id: string, payment_status: PaymentStatus, paid_amount: number, currency: string}} SandboxEvent
 * @typedef {{sku: string, name: string, price: number, currency: string, stock: number}} Product
 * @typedef {{sku: string, qty: number}} Item
 * @typedef {{provider: string, provider_reference: string, amount: number, currency: string, status: string}} Payment
 * @typedef {{id: string, status: string, currency: string, total_amount: number, payments: Payment[]}} Order
 * @typedef {Record<number, string[]>} Expected status → the `result` values allowed with it
 */

// ---- configuration ----

/** The public development secret that `sekali serve` uses when none is set. */
export const DEV_SECRET = 'whsec_c2VrYWxpLWRldmVsb3BtZW50LXdlYmhvb2stc2VjcmV0';

/**
 * @param {string} name
 * @param {string} fallback
 * @returns {string}
 */
export function envString(name, fallback) {
  const v = __ENV[name];
  return v === undefined || v === '' ? fallback : v;
}

/**
 * A whole number from __ENV; a typo stops the run instead of shrinking it.
 * @param {string} name
 * @param {number} fallback
 * @param {number} [min]
 * @returns {number}
 */
export function envInt(name, fallback, min = 1) {
  const text = envString(name, String(fallback));
  const n = Number(text);
  if (!Number.isInteger(n) || n < min) {
    throw new Error(`${name}=${text}: want a whole number of at least ${min}`);
  }
  return n;
}

export const BASE_URL = envString('BASE_URL', 'http://localhost:8080').replace(/\/+$/, '');

const ADMIN_TOKEN = envString('ADMIN_API_TOKEN', '');
if (ADMIN_TOKEN === '') {
  // Without it nothing can be set up or audited, so fail before any load.
  throw new Error('ADMIN_API_TOKEN is required: pass the token the server runs with (k6 run -e ADMIN_API_TOKEN=...)');
}

/**
 * The gateway whose format the callbacks are written in, and the secret
 * the server checks them with (the same variable the server reads).
 * @type {'sandbox' | 'midtrans' | 'xendit' | 'stripe'}
 */
export const PROVIDER = /** @type {any} */ (envString('PROVIDER', 'sandbox'));
/** @type {Record<string, string>} */
const SECRET_VARIABLES = {
  sandbox: 'SANDBOX_WEBHOOK_SECRET',
  midtrans: 'MIDTRANS_SERVER_KEY',
  xendit: 'XENDIT_CALLBACK_TOKEN',
  stripe: 'STRIPE_WEBHOOK_SECRET',
};
if (!(PROVIDER in SECRET_VARIABLES)) {
  throw new Error(`PROVIDER=${PROVIDER}: want one of ${Object.keys(SECRET_VARIABLES).join(', ')}`);
}
// The server accepts a comma-separated list (rotation); signing needs one.
const SECRET = envString(SECRET_VARIABLES[PROVIDER], PROVIDER === 'sandbox' ? DEV_SECRET : '').split(',')[0].trim();
if (PROVIDER === 'sandbox' && SECRET.indexOf('whsec_') !== 0) {
  throw new Error('SANDBOX_WEBHOOK_SECRET must look like whsec_<base64>');
}
if (SECRET === '') {
  throw new Error(`PROVIDER=${PROVIDER} needs ${SECRET_VARIABLES[PROVIDER]}: the secret the server checks its callbacks with`);
}
// Standard Webhooks: the HMAC key is the base64-decoded part, not the text.
const KEY = PROVIDER === 'sandbox' ? b64decode(SECRET.slice('whsec_'.length), 'std') : new ArrayBuffer(0);

// ---- signing and callbacks ----

/**
 * The Standard Webhooks v1 signature of one delivery.
 * @param {string} id webhook-id
 * @param {number} timestamp unix seconds
 * @param {string} body the exact bytes sent
 * @returns {string}
 */
export function sign(id, timestamp, body) {
  return 'v1,' + hmac('sha256', KEY, `${id}.${timestamp}.${body}`, 'base64');
}

/**
 * A sandbox body. The key order is fixed so that every copy of an event is
 * byte-identical, as a provider's retry is.
 * @param {SandboxEvent} ev
 * @returns {string}
 */
export function sandboxBody(ev) {
  return JSON.stringify({
    order_id: ev.order_id,
    transaction_id: ev.transaction_id,
    payment_status: ev.payment_status,
    paid_amount: ev.paid_amount,
    currency: ev.currency,
  });
}

/**
 * Whether the gateway sends a notification of this status (Xendit has no
 * failed invoice, Stripe no expired PaymentIntent).
 * @param {PaymentStatus} status
 * @returns {boolean}
 */
export function expressible(status) {
  return !((PROVIDER === 'xendit' && status === 'failed') || (PROVIDER === 'stripe' && status === 'expired'));
}

/** Midtrans's transaction_status and status_code of each status. */
const MIDTRANS_STATUS = {
  paid: ['settlement', '200'],
  pending: ['pending', '201'],
  failed: ['cancel', '202'], // the payment ended; a deny is one declined attempt
  expired: ['expire', '407'],
};
const XENDIT_STATUS = { paid: 'PAID', pending: 'PENDING', expired: 'EXPIRED' };

/**
 * The body of event `id` in PROVIDER's format (the same as the Go
 * replayer's payments.Sender writes). Amounts are rupiah: Midtrans writes
 * "150000.00", Stripe counts IDR in hundredths. Every copy of one event is
 * byte-identical, as a provider's retry is. Midtrans has no event id: its
 * key is transaction_id:transaction_status, and its signature is inside
 * the body. The event happened unless `happened` is false (a changed copy,
 * meant to conflict): where Sekali confirms the notification with the
 * gateway's API, the sandbox gateway standing in for that API is told of
 * it first (tell).
 * @param {string} id
 * @param {SandboxEvent} ev
 * @param {boolean} [happened]
 * @returns {string}
 */
export function eventBody(id, ev, happened = true) {
  if (!expressible(ev.payment_status)) {
    throw new Error(`${PROVIDER} sends no ${ev.payment_status} notification`);
  }
  switch (PROVIDER) {
    case 'midtrans': {
      const [status, code] = MIDTRANS_STATUS[ev.payment_status];
      const gross = `${ev.paid_amount}.00`;
      const body = JSON.stringify({
        currency: ev.currency,
        gross_amount: gross,
        order_id: ev.order_id,
        payment_type: 'bank_transfer',
        signature_key: sha512(ev.order_id + code + gross + SECRET, 'hex'),
        status_code: code,
        transaction_id: ev.transaction_id,
        transaction_status: status,
      });
      if (happened && ev.payment_status !== 'pending') {
        tell(`/sandbox/midtrans/v2/${encodeURIComponent(ev.transaction_id)}/status`, body, {
          Authorization: `Basic ${b64encode(`${SECRET}:`)}`,
        });
      }
      return body;
    }
    case 'xendit': {
      /** @type {Record<string, string | number>} */
      const invoice = {
        amount: ev.paid_amount,
        currency: ev.currency,
        external_id: ev.order_id,
        id: ev.transaction_id,
        status: XENDIT_STATUS[/** @type {'paid' | 'pending' | 'expired'} */ (ev.payment_status)],
      };
      if (ev.payment_status === 'paid') {
        invoice.paid_amount = ev.paid_amount;
      }
      const body = JSON.stringify(invoice);
      if (happened && ev.payment_status === 'paid') { // only a payment is confirmed
        tell(`/sandbox/xendit/v2/invoices/${encodeURIComponent(ev.transaction_id)}`, body, { 'x-callback-token': SECRET });
      }
      return body;
    }
    case 'stripe': {
      const amount = ev.paid_amount * 100; // IDR at Stripe: hundredths
      const meta = { order_id: ev.order_id };
      const object =
        ev.payment_status === 'pending'
          ? { id: `cs_${ev.transaction_id}`, object: 'checkout.session', client_reference_id: ev.order_id,
              payment_intent: ev.transaction_id, amount_total: amount, currency: 'idr', payment_status: 'unpaid' }
          : { id: ev.transaction_id, object: 'payment_intent', amount, currency: 'idr', metadata: meta,
              amount_received: ev.payment_status === 'paid' ? amount : 0,
              status: ev.payment_status === 'paid' ? 'succeeded' : 'canceled' };
      const type = { paid: 'payment_intent.succeeded', failed: 'payment_intent.canceled', pending: 'checkout.session.completed' }[
        /** @type {'paid' | 'failed' | 'pending'} */ (ev.payment_status)
      ];
      return JSON.stringify({ id, object: 'event', type, data: { object } });
    }
  }
  return sandboxBody(ev);
}

/**
 * Tells the server's sandbox gateway, which stands in for the API that
 * Sekali confirms the gateway's notifications with — Midtrans's status
 * API (every notification but a pending one), Xendit's invoice API (a
 * paid invoice) — that a payment is as its signed notification says, as
 * a real payment exists at the gateway before its notification (the same
 * as the Go replayer does: payments.Teller). The server needs
 * SANDBOX_GATEWAY=on with the gateway's API URL at the sandbox gateway:
 * MIDTRANS_API_URL unset, XENDIT_API_URL set to {server}/sandbox/xendit.
 * @param {string} path below BASE_URL
 * @param {string} body the notification, signed when its signature is inside it
 * @param {Record<string, string>} headers the credentials the sandbox gateway checks
 */
function tell(path, body, headers) {
  const res = http.put(`${BASE_URL}${path}`, body, {
    headers: Object.assign({ 'Content-Type': 'application/json' }, headers),
    tags: { endpoint: 'sandbox' },
  });
  if (res.status !== 204) {
    throw new Error(
      `telling the sandbox gateway of ${path}: HTTP ${res.status} (the server needs SANDBOX_GATEWAY=on, with the API URL of ${PROVIDER} at the sandbox gateway)`,
    );
  }
}

/**
 * Headers and tags of one signed delivery, stamped with the current time
 * (the sandbox and Stripe allow ±5 minutes).
 * @param {string} id
 * @param {string} body
 * @param {Record<string, string>} [tags]
 * @returns {Params}
 */
export function callbackParams(id, body, tags) {
  const ts = Math.floor(Date.now() / 1000);
  /** @type {Record<string, string>} */
  let headers;
  switch (PROVIDER) {
    case 'midtrans': // signed inside the body
      headers = {};
      break;
    case 'xendit':
      headers = { 'x-callback-token': SECRET, 'webhook-id': id };
      break;
    case 'stripe':
      headers = { 'Stripe-Signature': `t=${ts},v1=${hmac('sha256', SECRET, `${ts}.${body}`, 'hex')}` };
      break;
    default:
      headers = { 'webhook-id': id, 'webhook-timestamp': String(ts), 'webhook-signature': sign(id, ts, body) };
  }
  return {
    headers: Object.assign({ 'Content-Type': 'application/json' }, headers),
    tags: Object.assign({ endpoint: 'callback', provider: PROVIDER }, tags),
  };
}

/**
 * One delivery for http.batch.
 * @param {string} id
 * @param {string} body
 * @param {Record<string, string>} [tags]
 * @returns {BatchRequest}
 */
export function callbackRequest(id, body, tags) {
  return { method: 'POST', url: `${BASE_URL}/callbacks/${PROVIDER}`, body, params: callbackParams(id, body, tags) };
}

/**
 * Sends one delivery.
 * @param {string} id
 * @param {string} body
 * @param {Record<string, string>} [tags]
 * @returns {Response}
 */
export function sendCallback(id, body, tags) {
  return http.post(`${BASE_URL}/callbacks/${PROVIDER}`, body, callbackParams(id, body, tags));
}

// ---- result accounting ----

/** Every `result` a callback answer can carry (docs/callbacks.md). */
export const RESULTS = ['processed', 'duplicate', 'stale', 'conflict', 'rejected', 'ignored', 'error'];

/** @type {Record<string, Counter>} */
const resultCounters = {};
for (const r of RESULTS) {
  resultCounters[r] = new Counter(`result_${r}`);
}
const otherResults = new Counter('result_other'); // no JSON, or an unknown result

/** Share of answers (callbacks and orders) other than the scenario expects. */
const unexpectedStatus = new Rate('unexpected_status');
const serverErrors = new Counter('status_5xx');
const auditPassed = new Counter('audit_passed');
const auditViolations = new Counter('audit_violations');

/** @type {Counter[]} */
const primed = [];

/**
 * Registers scenario counters to be primed with the shared ones.
 * @param {string} name
 * @returns {Counter}
 */
export function scenarioCounter(name) {
  const c = new Counter(name);
  primed.push(c);
  return c;
}

/**
 * Adds a zero to every counter, from setup(). k6 skips the thresholds of a
 * metric that never got a sample, so `count==N` would pass on a run that
 * sent nothing, and `audit_passed count==1` on one whose teardown never ran.
 */
export function primeMetrics() {
  for (const c of Object.values(resultCounters).concat(primed, [otherResults, serverErrors, auditPassed, auditViolations])) {
    c.add(0);
  }
}

let warnings = 0;

/**
 * Logs the first few unexpected answers of this VU; a storm of them would
 * drown the summary.
 * @param {string} what
 * @param {Response} res
 */
export function warnAnswer(what, res) {
  if (warnings++ < 5) {
    console.warn(`${what}: unexpected answer ${res.status}${res.error ? ' (' + res.error + ')' : ''} ${bodyText(res).slice(0, 300)}`);
  }
}

/**
 * Counts one callback answer by its `result` and checks it against what the
 * scenario allows.
 * @param {Response} res
 * @param {Expected} expected
 * @returns {string} the result, '' when the answer has none
 */
export function recordCallback(res, expected) {
  const result = stringField(parseObject(res), 'result');
  (Object.prototype.hasOwnProperty.call(resultCounters, result) ? resultCounters[result] : otherResults).add(1);
  if (res.status >= 500) {
    serverErrors.add(1);
  }
  const allowed = expected[res.status];
  const ok = allowed !== undefined && allowed.indexOf(result) >= 0;
  unexpectedStatus.add(!ok);
  check(res, { 'callback: expected status and result': () => ok });
  if (!ok) {
    warnAnswer(`callback ${requestHeader(res, 'webhook-id')}`, res);
  }
  return result;
}

/**
 * Counts one non-callback answer (order creation) as expected or not.
 * @param {Response} res
 * @param {boolean} ok
 * @param {string} what
 */
export function recordAnswer(res, ok, what) {
  if (res.status >= 500) {
    serverErrors.add(1);
  }
  unexpectedStatus.add(!ok);
  check(res, { [`${what}: expected answer`]: () => ok });
  if (!ok) {
    warnAnswer(what, res);
  }
}

// ---- JSON helpers ----

/**
 * @param {Response} res
 * @returns {string}
 */
function bodyText(res) {
  return typeof res.body === 'string' ? res.body : '';
}

/**
 * The answer's JSON object, or {} when it is not one.
 * @param {Response} res
 * @returns {Record<string, unknown>}
 */
export function parseObject(res) {
  try {
    const v = JSON.parse(bodyText(res));
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? v : {};
  } catch (e) {
    return {};
  }
}

/**
 * @param {Record<string, unknown>} obj
 * @param {string} name
 * @returns {string}
 */
export function stringField(obj, name) {
  const v = obj[name];
  return typeof v === 'string' ? v : '';
}

/**
 * @param {Record<string, unknown>} obj
 * @param {string} name
 * @returns {number}
 */
function numberField(obj, name) {
  const v = obj[name];
  return typeof v === 'number' ? v : NaN;
}

/**
 * @param {Response} res
 * @param {string} name
 * @returns {string}
 */
function requestHeader(res, name) {
  const headers = res.request && res.request.headers ? res.request.headers : {};
  for (const k of Object.keys(headers)) {
    if (k.toLowerCase() === name) {
      const v = headers[k];
      return Array.isArray(v) ? v.join(',') : String(v);
    }
  }
  return '';
}

/**
 * An order as the API shows it.
 * @param {Record<string, unknown>} obj
 * @returns {Order}
 */
function toOrder(obj) {
  const payments = Array.isArray(obj.payments) ? obj.payments : [];
  return {
    id: stringField(obj, 'id'),
    status: stringField(obj, 'status'),
    currency: stringField(obj, 'currency'),
    total_amount: numberField(obj, 'total_amount'),
    payments: payments.map((/** @type {Record<string, unknown>} */ p) => ({
      provider: stringField(p, 'provider'),
      provider_reference: stringField(p, 'provider_reference'),
      amount: numberField(p, 'amount'),
      currency: stringField(p, 'currency'),
      status: stringField(p, 'status'),
    })),
  };
}

// ---- set-up through the API ----

/** @returns {string} */
function randomTag() {
  return Math.random().toString(36).slice(2, 8);
}

/**
 * A run id that no earlier or concurrent run shares, for SKUs, keys and ids.
 * @param {string} scenario
 * @returns {string}
 */
export function runId(scenario) {
  return `${scenario}-${Date.now()}-${randomTag()}`;
}

/** @returns {Params} */
function adminParams() {
  return {
    headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, 'Content-Type': 'application/json' },
    tags: { endpoint: 'admin' },
    timeout: '180s', // the audit drains for up to AUDIT_DRAIN_TIMEOUT first
  };
}

/**
 * Stops set-up with the server's own explanation.
 * @param {string} what
 * @param {Response} res
 * @returns {never}
 */
function setupFailed(what, res) {
  let hint = '';
  if (res.status === 404 && what.indexOf('/api/products') >= 0) {
    hint = ' (is ADMIN_API_TOKEN set on the server?)';
  } else if (res.status === 401) {
    hint = ' (ADMIN_API_TOKEN differs from the server\'s)';
  } else if (res.status === 0) {
    hint = ` (is the server running at ${BASE_URL}?)`;
  }
  throw new Error(`${what}: ${res.status}${hint} ${res.error || ''} ${bodyText(res).slice(0, 500)}`);
}

/**
 * Creates a product of its own for this run (POST /api/products).
 * @param {string} run the run id
 * @param {{price: number, stock: number, label?: string, currency?: string}} spec
 * @returns {Product}
 */
export function createProduct(run, spec) {
  const label = spec.label ? `-${spec.label}` : '';
  // SKUs allow 64 letters, digits, '.', '_' and '-'.
  const sku = `K6-${run}${label}`.slice(0, 64);
  const req = { sku, name: `k6 ${run}${label}`, price: spec.price, currency: spec.currency || 'IDR', stock: spec.stock };
  const res = http.post(`${BASE_URL}/api/products`, JSON.stringify(req), adminParams());
  const ok = check(res, { 'setup: product created (201)': (r) => r.status === 201 });
  if (!ok) {
    setupFailed('POST /api/products', res);
  }
  return req;
}

/**
 * @param {string} key Idempotency-Key
 * @param {Item[]} items
 * @param {string} email
 * @param {Record<string, string>} [tags]
 * @returns {BatchRequest}
 */
export function orderRequest(key, items, email, tags) {
  return {
    method: 'POST',
    url: `${BASE_URL}/api/orders`,
    body: JSON.stringify({ customer_email: email, items }),
    params: {
      headers: { 'Content-Type': 'application/json', 'Idempotency-Key': key },
      tags: Object.assign({ endpoint: 'order' }, tags),
    },
  };
}

/**
 * Sends one order (POST /api/orders).
 * @param {string} key
 * @param {Item[]} items
 * @param {string} email
 * @param {Record<string, string>} [tags]
 * @returns {Response}
 */
export function postOrder(key, items, email, tags) {
  const r = orderRequest(key, items, email, tags);
  return http.post(r.url.toString(), r.body, r.params);
}

/**
 * Reads the order out of a 201 answer.
 * @param {Response} res
 * @returns {Order}
 */
export function orderOf(res) {
  return toOrder(parseObject(res));
}

/**
 * Creates count orders of items, 20 at a time, each under its own key;
 * any failure stops set-up.
 * @param {string} run
 * @param {number} count
 * @param {Item[]} items
 * @returns {Order[]}
 */
export function createOrders(run, count, items) {
  /** @type {Order[]} */
  const orders = [];
  for (let start = 0; start < count; start += 20) {
    /** @type {BatchRequest[]} */
    const batch = [];
    for (let i = start; i < Math.min(count, start + 20); i++) {
      batch.push(orderRequest(`${run}-order-${i}`, items, `qa-${i}@example.com`, { endpoint: 'setup' }));
    }
    for (const res of http.batch(batch)) {
      if (!check(res, { 'setup: order created (201)': (r) => r.status === 201 })) {
        setupFailed('POST /api/orders', res);
      }
      orders.push(orderOf(res));
    }
  }
  return orders;
}

/**
 * Creates a product with `count` units and `count` one-unit orders of it,
 * and a paid event for each order: the set-up of the scenarios that
 * deliver one payment per order many times.
 * @param {string} run
 * @param {number} count
 * @param {number} price
 * @returns {{id: string, order: string, body: string}[]}
 */
export function paidEvents(run, count, price) {
  const product = createProduct(run, { price, stock: count });
  const orders = createOrders(run, count, [{ sku: product.sku, qty: 1 }]);
  return orders.map((o, i) => ({
    id: `evt-${run}-${i}`,
    order: o.id,
    body: eventBody(`evt-${run}-${i}`, {
      order_id: o.id,
      transaction_id: `tx-${run}-${i}`,
      payment_status: 'paid',
      paid_amount: o.total_amount,
      currency: o.currency,
    }),
  }));
}

/**
 * Whether an order was paid exactly once: paid, with one payment, which
 * succeeded.
 * @param {Order} o
 * @returns {boolean}
 */
export function paidOnce(o) {
  return o.status === 'paid' && o.payments.length === 1 && paymentsIn(o, 'succeeded') === 1;
}

/**
 * Reads orders (GET /api/orders/{id}), 20 at a time, with the admin token:
 * an order opens only with its own access token or that one.
 * @param {string[]} ids
 * @returns {Order[]}
 */
export function getOrders(ids) {
  /** @type {Order[]} */
  const orders = [];
  for (let start = 0; start < ids.length; start += 20) {
    const batch = ids.slice(start, start + 20).map((id) => ({
      method: 'GET',
      url: `${BASE_URL}/api/orders/${encodeURIComponent(id)}`,
      params: { headers: { Authorization: `Bearer ${ADMIN_TOKEN}` }, tags: { endpoint: 'verify' } },
    }));
    for (const res of http.batch(batch)) {
      orders.push(res.status === 200 ? orderOf(res) : { id: '', status: `http ${res.status}`, currency: '', total_amount: NaN, payments: [] });
    }
  }
  return orders;
}

/**
 * Payments of an order in one status.
 * @param {Order} order
 * @param {string} status
 * @returns {number}
 */
export function paymentsIn(order, status) {
  return order.payments.filter((p) => p.status === status).length;
}

/**
 * Reads every order back and checks its end state, from teardown().
 * @param {string[]} ids
 * @param {string} name the check's name
 * @param {(o: Order) => boolean} want
 */
export function checkOrders(ids, name, want) {
  let bad = 0;
  getOrders(ids).forEach((o, i) => {
    const ok = want(o);
    check(o, { [name]: () => ok });
    if (!ok && bad++ < 5) {
      console.error(`${name}: order ${ids[i]} is ${o.status} with payments ${JSON.stringify(o.payments)}`);
    }
  });
  if (bad > 0) {
    console.error(`${name}: ${bad} of ${ids.length} orders are not as expected`);
  }
}

// ---- verdict ----

/**
 * Asks the integrity audit (GET /api/audit), which first waits for the
 * outbox and the jobs to drain. Any violation, or no answer, fails the run:
 * through the audit_passed and audit_violations thresholds and, on k6 1.0
 * or newer, exec.test.fail.
 */
export function audit() {
  const drain = envString('AUDIT_DRAIN_TIMEOUT', '60s');
  const res = http.get(`${BASE_URL}/api/audit?drain_timeout=${encodeURIComponent(drain)}`, adminParams());
  const report = parseObject(res);
  const ok = res.status === 200 && report.ok === true;
  const violations = Array.isArray(report.violations) ? report.violations : [];
  const checked = Array.isArray(report.checked) ? report.checked : [];
  check(res, { 'audit: no violations (GET /api/audit)': () => ok });
  if (ok) {
    auditPassed.add(1);
    console.log(`audit: ok, drained=${String(report.drained)}, ${checked.length} checks in ${stringField(report, 'took')}`);
    return;
  }
  auditViolations.add(Math.max(violations.length, 1));
  if (res.status !== 200) {
    console.error(`audit: GET /api/audit answered ${res.status} ${res.error || ''} ${bodyText(res).slice(0, 500)}`);
  } else {
    console.error(`audit: ${violations.length} violation(s), drained=${String(report.drained)}`);
    for (const v of violations) {
      const obj = v !== null && typeof v === 'object' ? /** @type {Record<string, unknown>} */ (v) : {};
      console.error(`  [${stringField(obj, 'check')}] ${stringField(obj, 'detail')}`);
    }
  }
  if (typeof exec.test.fail === 'function') {
    exec.test.fail(`integrity audit failed (${violations.length} violations)`);
  }
}

// ---- options ----

/**
 * p95/p99 bounds in milliseconds for a duration metric; P95_MS and P99_MS
 * override the scenario's defaults.
 * @param {string} metric e.g. 'http_req_duration{endpoint:callback}'
 * @param {number} p95
 * @param {number} p99
 * @returns {Record<string, string[]>}
 */
export function latency(metric, p95, p99) {
  return { [metric]: [`p(95)<${envInt('P95_MS', p95)}`, `p(99)<${envInt('P99_MS', p99)}`] };
}

/**
 * Adds what every scenario shares: the thresholds that make the verdict,
 * time for set-up and the audit's drain, and p99 in the summary.
 * @param {Options} options
 * @returns {Options}
 */
export function withDefaults(options) {
  const thresholds = Object.assign(
    {
      checks: ['rate==1'],
      unexpected_status: ['rate==0'],
      status_5xx: ['count==0'],
      audit_passed: ['count==1'],
      audit_violations: ['count==0'],
    },
    options.thresholds,
  );
  return Object.assign(
    {
      setupTimeout: '5m',
      teardownTimeout: '5m',
      summaryTrendStats: ['avg', 'min', 'med', 'max', 'p(90)', 'p(95)', 'p(99)', 'count'],
    },
    options,
    { thresholds },
  );
}

// ---- summary ----

/**
 * The parts of k6's summary data that the formatter reads.
 * @typedef {{type?: string, values?: Record<string, number>, thresholds?: Record<string, {ok: boolean}>}} SummaryMetric
 * @typedef {{name?: string, checks?: {name: string, passes: number, fails: number}[], groups?: SummaryGroup[]}} SummaryGroup
 * @typedef {{metrics?: Record<string, SummaryMetric>, root_group?: SummaryGroup, state?: {testRunDurationMs?: number}}} SummaryData
 */

/**
 * @param {number | undefined} v
 * @param {number} [digits]
 * @returns {string}
 */
function fmt(v, digits = 2) {
  if (v === undefined || Number.isNaN(v)) {
    return '-';
  }
  return Number.isInteger(v) ? String(v) : v.toFixed(digits);
}

/**
 * @param {string} s
 * @param {number} n
 * @returns {string}
 */
function pad(s, n) {
  return s.length >= n ? s : s + ' '.repeat(n - s.length);
}

/**
 * @param {SummaryGroup | undefined} group
 * @param {{name: string, passes: number, fails: number}[]} out
 * @returns {{name: string, passes: number, fails: number}[]}
 */
function allChecks(group, out) {
  if (group) {
    for (const c of group.checks || []) {
      out.push(c);
    }
    for (const g of group.groups || []) {
      allChecks(g, out);
    }
  }
  return out;
}

/**
 * The metric's value that a threshold reads, for the summary line.
 * @param {SummaryMetric} m
 * @param {string} expr
 * @returns {string}
 */
function thresholdValue(m, expr) {
  const values = m.values || {};
  const stat = expr.replace(/\s*(==|===|!=|<=|>=|<|>).*$/, '').trim();
  if (values[stat] !== undefined) {
    return `${stat}=${fmt(values[stat])}`;
  }
  return Object.keys(values).map((k) => `${k}=${fmt(values[k])}`).join(' ');
}

/**
 * A short text report: verdict, thresholds, callback results, checks and
 * latency. Local, so that it type-checks and needs no remote import.
 * @param {string} scenario
 * @param {SummaryData} data
 * @param {Record<string, string | number>} settings
 * @param {string} file where the JSON goes
 * @returns {{text: string, passed: boolean, failed: string[]}}
 */
export function formatSummary(scenario, data, settings, file) {
  const metrics = data.metrics || {};
  /** @type {string[]} */
  const failed = [];
  /** @type {string[]} */
  const thresholdLines = [];
  for (const name of Object.keys(metrics).sort()) {
    const m = metrics[name];
    const ths = m.thresholds || {};
    for (const expr of Object.keys(ths)) {
      const ok = ths[expr].ok;
      if (!ok) {
        failed.push(`${name}: ${expr}`);
      }
      thresholdLines.push(`    ${ok ? 'ok  ' : 'FAIL'} ${pad(name, 44)} ${pad(expr, 14)} ${thresholdValue(m, expr)}`);
    }
  }
  const passed = failed.length === 0;
  const secs = data.state && data.state.testRunDurationMs ? ` in ${(data.state.testRunDurationMs / 1000).toFixed(1)}s` : '';
  const lines = [
    '',
    `Sekali k6 ${scenario}: ${passed ? 'PASS' : 'FAIL'}${secs}`,
    `  ${Object.keys(settings).map((k) => `${k}=${settings[k]}`).join(' ')} BASE_URL=${BASE_URL}`,
    '',
    '  thresholds',
  ].concat(thresholdLines);

  /**
   * @param {string} name
   * @returns {number | undefined}
   */
  const count = (name) => (metrics[name] && metrics[name].values ? metrics[name].values.count : undefined);
  const results = RESULTS.concat(['other'])
    .map((r) => `${r}=${fmt(count(`result_${r}`))}`)
    .join(' ');
  lines.push('', `  callback results  ${results}`);

  const checks = allChecks(data.root_group, []);
  const passes = checks.reduce((n, c) => n + c.passes, 0);
  const fails = checks.reduce((n, c) => n + c.fails, 0);
  lines.push(`  checks            ${passes} passed, ${fails} failed`);
  for (const c of checks) {
    if (c.fails > 0) {
      lines.push(`    FAIL ${c.name}: ${c.fails} of ${c.passes + c.fails}`);
    }
  }

  lines.push('', `  latency (ms)${' '.repeat(38)}  med      p95      p99      max      count`);
  for (const name of Object.keys(metrics).sort()) {
    const v = metrics[name].values;
    if (name.indexOf('http_req_duration') === 0 && v) {
      const cols = [v.med, v['p(95)'], v['p(99)'], v.max, v.count].map((x) => pad(fmt(x), 8)).join(' ');
      lines.push(`    ${pad(name, 46)} ${cols}`);
    }
  }
  const reqs = metrics.http_reqs && metrics.http_reqs.values ? metrics.http_reqs.values : {};
  lines.push('', `  requests ${fmt(reqs.count)} (${fmt(reqs.rate, 1)}/s), dropped iterations ${fmt(count('dropped_iterations') || 0)}`);
  if (!passed) {
    lines.push('', '  failed thresholds:', ...failed.map((f) => `    ${f}`), '  the audit\'s violations, if any, are printed above (audit: ...)');
  }
  lines.push(`  JSON: ${file}`, '');
  return { text: lines.join('\n'), passed, failed };
}

/**
 * What handleSummary() returns: the text report on stdout and k6's summary
 * data, plus the verdict and settings, as JSON in RESULTS_DIR (default
 * `results`, relative to the working directory; it must exist).
 * @param {string} scenario
 * @param {SummaryData} data
 * @param {Record<string, string | number>} settings
 * @returns {Record<string, string>}
 */
export function summaryOutputs(scenario, data, settings) {
  const dir = envString('RESULTS_DIR', 'results').replace(/\/+$/, '');
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const file = `${dir}/${scenario}-${stamp}.json`;
  const report = formatSummary(scenario, data, settings, file);
  const json = Object.assign({}, data, {
    sekali: { scenario, passed: report.passed, failed_thresholds: report.failed, settings, base_url: BASE_URL },
  });
  return { stdout: report.text, [file]: JSON.stringify(json, null, 2) };
}
