// duplicate-storm: EVENTS paid events, each delivered COPIES times by VUS
// concurrent clients. Proves a retry storm applies every event exactly
// once: one `processed` per event, every other copy `duplicate`, no 5xx,
// every order paid with one succeeded payment, and a green audit.
import exec from 'k6/execution';
import {
  audit,
  checkOrders,
  envInt,
  latency,
  paidEvents,
  paidOnce,
  primeMetrics,
  recordCallback,
  runId,
  sendCallback,
  summaryOutputs,
  withDefaults,
} from './lib/sekali.js';

const SCENARIO = 'duplicate-storm';
const EVENTS = envInt('EVENTS', 100);
const COPIES = envInt('COPIES', 50);
const VUS = envInt('VUS', 200);
const TOTAL = EVENTS * COPIES;

export const options = withDefaults({
  scenarios: {
    storm: {
      executor: 'shared-iterations',
      vus: Math.min(VUS, TOTAL),
      iterations: TOTAL,
      maxDuration: '10m',
    },
  },
  thresholds: Object.assign(
    {
      result_processed: [`count==${EVENTS}`],
      result_duplicate: [`count==${TOTAL - EVENTS}`],
    },
    latency('http_req_duration{endpoint:callback}', 1000, 2000),
  ),
});

export function setup() {
  primeMetrics();
  const run = runId(SCENARIO);
  const events = paidEvents(run, EVENTS, 150000);
  return { events };
}

/** @param {ReturnType<typeof setup>} data */
export default function (data) {
  // Consecutive iterations share an event, so the VUS clients deliver the
  // copies of a few events at the same moment rather than one copy each.
  const ev = data.events[Math.floor(exec.scenario.iterationInTest / COPIES) % data.events.length];
  recordCallback(sendCallback(ev.id, ev.body), { 200: ['processed', 'duplicate'] });
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
