#!/usr/bin/env node
// Benchmark: the email channel. How long from a decision being opened (POST /decisions with an
// email approver, through the gateway) to its message being accepted by the SMTP server: the
// decision service's outbox -> Kafka -> the delivery record -> the delivery loop -> SMTP. The SMTP
// server is a Mailpit of the benchmark's own (testkit's startMailpit), whose accept time is read
// from its API, so polling does not blur the figure.
//
//   npm run bench:email                (infra must be up, or this runs `deploy/infra.sh up`)
//
// Settings (environment):
//   BENCH_PROBES=100   decisions, one at a time, each to an address of its own
import { call, createKafkaNamespace, createWorkspace, SERVER_API, startMailpit } from '@herald/testkit';

import { atCleanup, infraEnv, intEnv, log, reportHead, runBench } from './lib/bench.js';
import { percentile } from './lib/load.js';
import { backgroundLoad } from './lib/processes.js';
import { recordRun } from './lib/record.js';
import { startHerald } from './lib/stack.js';

const settings = {
  probes: intEnv('BENCH_PROBES', 100),
};
const HARD_DEADLINE_MS = 300_000;
const MAIL_TIMEOUT_MS = 30_000;

async function main(): Promise<number> {
  const infra = await infraEnv();
  const idleBusy = await backgroundLoad();
  const namespace = await createKafkaNamespace();
  atCleanup(() => namespace.remove());
  const mailpit = await startMailpit();
  atCleanup(() => mailpit.stop());
  log('stack: gateway, account, audience, decision; Mailpit');
  const herald = await startHerald({
    services: ['account', 'audience', 'decision'],
    env: { ...infra, LOG_LEVEL: 'warn', HERALD_NAMESPACE: namespace.prefix, SMTP_URL: mailpit.smtpUrl, ANSWER_TOKEN_SECRET: 'bench-answer-token-secret-of-32-bytes-or-more' },
  });
  const gatewayUrl = `http://127.0.0.1:${herald.gatewayPort}`;
  const workspace = await createWorkspace('enterprise');

  log(`${settings.probes} decisions, one at a time, each mailed to one approver`);
  const mailMs: number[] = [];
  const run = `${Date.now().toString(36)}`;
  for (let probe = 0; probe < settings.probes; probe += 1) {
    const address = `approver-${run}-${probe}@bench.example.test`;
    const started = Date.now();
    const opened = await call(gatewayUrl, `${SERVER_API}/decisions`, {
      method: 'POST',
      key: workspace.apiKey,
      body: { question: `Deploy build ${probe}?`, toolName: 'deploy', toolTarget: 'prod', approvers: [{ kind: 'email', id: address }] },
    });
    if (opened.status !== 200) throw new Error(`POST /decisions answered ${opened.status}: ${JSON.stringify(opened.body)}`);
    const message = await mailpit.waitForMessage(address, { timeoutMs: MAIL_TIMEOUT_MS });
    mailMs.push(message.receivedAt.getTime() - started);
  }
  mailMs.sort((a, b) => a - b);

  console.log('');
  for (const line of reportHead('Email channel: decision opened -> mail accepted by Mailpit', idleBusy)) console.log(line);
  console.log(`  opened -> mail accepted   p50 ${percentile(mailMs, 50).toFixed(0)} ms, p99 ${percentile(mailMs, 99).toFixed(0)} ms, max ${(mailMs.at(-1) ?? 0).toFixed(0)} ms (${settings.probes} decisions, one at a time; Mailpit's clock has millisecond precision)`);
  const recorded = recordRun(
    'email',
    [
      { name: 'decision opened -> mail accepted p50', value: Math.round(percentile(mailMs, 50)), unit: 'ms', better: 'lower' },
      { name: 'decision opened -> mail accepted p99', value: Math.round(percentile(mailMs, 99)), unit: 'ms', better: 'lower' },
    ],
    settings,
    idleBusy,
  );
  if (recorded) log(`recorded in ${recorded}`);
  await herald.stop();
  return 0;
}

void runBench(main, HARD_DEADLINE_MS);
