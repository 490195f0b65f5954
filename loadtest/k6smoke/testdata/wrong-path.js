// A script with a mistake the smoke runner must catch: its callbacks go
// to a path the server does not serve (/callbacks/<provider>s), so every
// answer is a 404 and the check on each answer fails. Everything else is
// the library's, as in the real scripts.
import http from 'k6/http';
import exec from 'k6/execution';
import {
  BASE_URL,
  PROVIDER,
  audit,
  callbackParams,
  paidEvents,
  primeMetrics,
  recordCallback,
  runId,
  withDefaults,
} from '../../k6/lib/sekali.js';

export const options = withDefaults({
  scenarios: { wrong: { executor: 'shared-iterations', vus: 2, iterations: 2 } },
  thresholds: { result_processed: ['count==2'] },
});

export function setup() {
  primeMetrics();
  return { events: paidEvents(runId('wrong-path'), 2, 50000) };
}

/** @param {ReturnType<typeof setup>} data */
export default function (data) {
  const ev = data.events[exec.scenario.iterationInTest % data.events.length];
  const res = http.post(`${BASE_URL}/callbacks/${PROVIDER}s`, ev.body, callbackParams(ev.id, ev.body));
  recordCallback(res, { 200: ['processed'] });
}

export function teardown() {
  audit();
}
