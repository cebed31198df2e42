import { waitForQuiet } from '../consumers.js';
import { connectDatabase } from '../database.js';
import { call, SERVER_API } from '../http.js';
import { eventually } from '../sending.js';
import { DRAIN_LIMIT_MS, isDown, REQUEST_DEADLINE_MS, WAIT_SECONDS, WELCOME_TITLES, type FaultDrillReport, type FaultRow } from './drill.js';
import { FAULT_MODULES } from './index.js';
import type { Load } from './load.js';

/**
 * The reconciliation every fault shares, once the load has stopped: what is still open is made,
 * then every record is compared with what was accepted, each loss or duplicate counted in the row
 * of the moment it was accepted: each subscriber got each notification once (a repeat under the
 * first's Topic is `repeated`, shown once), each accepted report is counted once, each question
 * is answered once and readable, each stored subscription ran the welcome flow once, nothing is
 * left pending or unpublished, and no process died by itself.
 */
export async function reconcile(load: Load, rows: FaultRow[]): Promise<FaultDrillReport> {
  const { stack, peer, harness, audience, settings, runProblems, calm, rowAt, pool, killed, notifications, acceptedReports, questions, welcomed, flowEndpoints, unanswered } = load;
  const { apiKey } = audience.workspace;
  const { countPushes, tallyPushes, recipientRecord, endedRuns } = load;
  // Drain: the retries of what was refused, the reports of the last pushes, the last answers.
  settings.log('load stopped; draining retries and the last reports');
  const drainDeadline = Date.now() + DRAIN_LIMIT_MS;
  const drain = (): Promise<void> => load.drain(drainDeadline);
  await settings.step('draining', DRAIN_LIMIT_MS + WAIT_SECONDS * 1_000 + REQUEST_DEADLINE_MS, drain());

  // Each question the decision service holds: one web push delivery, made once (or skipped, the
  // question answered before its turn); the notification it made is tracked like any other.
  const db = await settings.step('connecting to PostgreSQL', REQUEST_DEADLINE_MS, connectDatabase());
  try {
    const { rows: held } = await settings.step(
      "reading the questions' deliveries",
      REQUEST_DEADLINE_MS,
      db.query<{ id: string; question: string; created_at: Date; deliveries: { state: string; result: string | null; error: string | null }[] }>(
        `SELECT q.id, q.question, q.created_at,
                coalesce(jsonb_agg(jsonb_build_object('state', d.state, 'result', d.result, 'error', d.last_error)) FILTER (WHERE d.question_id IS NOT NULL), '[]') AS deliveries
           FROM decision.questions q
           LEFT JOIN decision.question_deliveries d ON d.question_id = q.id AND d.channel = 'web_push'
          WHERE q.workspace_id = $1
          GROUP BY q.id`,
        [audience.workspace.workspaceId],
      ),
    );
    /** The notifications the deliveries made (a question push's id). */
    const made = new Set<string>();
    for (const { id, question: text, created_at: createdAt, deliveries } of held) {
      const asked = questions.find((candidate) => candidate.id === id);
      // An ask whose 200 was lost with a killed gateway's connection was made all the same.
      if (!asked && unanswered.get(text) !== 'network') runProblems.push(`question ${id} ("${text}"): held, but its ask answered ${unanswered.get(text) ?? 'never'}`);
      const at = asked?.at ?? createdAt.getTime();
      const row = rowAt(at);
      const [delivery, ...more] = deliveries;
      if (more.length > 0) row.duplicated += more.length;
      if (!delivery || (delivery.state !== 'delivered' && !(delivery.state === 'skipped' && delivery.error === 'the question is answered'))) {
        row.lost += 1;
        row.problems.push(`question ${id}: web push deliveries ${JSON.stringify(deliveries)}`);
        continue;
      }
      // Delivered with an empty result: it addressed no approver device (an ask names nobody, and
      // the drill pairs none), so there is no push to follow.
      if (delivery.state === 'delivered' && delivery.result) {
        if (made.has(delivery.result)) row.duplicated += 1;
        made.add(delivery.result);
        notifications.set(delivery.result, { at, question: true });
      }
    }
    // Every question push the campaign service holds came from one of those deliveries.
    const { rows: queued } = await settings.step(
      "reading the questions' pushes",
      REQUEST_DEADLINE_MS,
      db.query<{ id: string }>(`SELECT id FROM campaign.campaigns WHERE workspace_id = $1 AND kind = 'question'`, [audience.workspace.workspaceId]),
    );
    const strays = queued.filter(({ id }) => !made.has(id));
    if (strays.length > 0) runProblems.push(`question pushes no delivery made: ${strays.map(({ id }) => id).join(', ')}`);
  } finally {
    await db.end();
  }
  settings.log(`reconciling ${notifications.size} notifications, ${acceptedReports.size} reports, ${questions.length} questions, ${welcomed.size} welcome runs`);
  // One deadline for all: past it, a notification still pending is a failure named at once, not one more wait.
  const reconcileDeadline = Date.now() + DRAIN_LIMIT_MS;
  for (const [id, tracked] of notifications) {
    const row = rowAt(tracked.at);
    try {
      await settings.step(
        `notification ${id} completing`,
        DRAIN_LIMIT_MS,
        eventually(
          `notification ${id} completed with nothing pending`,
          () => call<{ status: string; counts: { pending: number } }>(pool[0] as string, `${SERVER_API}/notifications/${id}`, { key: apiKey, timeoutMs: REQUEST_DEADLINE_MS }),
          (reply) => reply.status === 200 && reply.body.status === 'completed' && reply.body.counts.pending === 0,
          Math.max(0, reconcileDeadline - Date.now()),
        ),
      );
    } catch (err) {
      row.problems.push((err as Error).message);
    }
  }
  // Late pushes (retried ones) bring their reports; then every outbox row is published and every consumer caught up.
  await settings.step('draining again', DRAIN_LIMIT_MS + WAIT_SECONDS * 1_000 + REQUEST_DEADLINE_MS, drain());
  try {
    await settings.step('waiting for quiet', DRAIN_LIMIT_MS + REQUEST_DEADLINE_MS, waitForQuiet(stack.topicPrefix, settings.settle, { timeoutMs: DRAIN_LIMIT_MS }));
  } catch (err) {
    runProblems.push(`outboxes or consumers not quiet: ${(err as Error).message}`);
  }

  // Flows: every stored subscription started one run of the welcome flow, which ended, and its subscriber got each of the flow's pushes once.
  const runs = await settings.step('the welcome runs ending', DRAIN_LIMIT_MS + REQUEST_DEADLINE_MS, endedRuns(Date.now() + DRAIN_LIMIT_MS));
  for (const [endpoint, { subscriberId, at }] of welcomed) {
    const row = rowAt(at);
    const own = runs.filter((run) => run.subscriberId === subscriberId);
    if (own.length !== 1 || own[0]?.state !== 'completed') row.problems.push(`subscriber ${subscriberId}: welcome runs ${JSON.stringify(own)}`);
    const received = peer.received(endpoint, { includeReplaced: true });
    for (const title of WELCOME_TITLES) {
      const wrong = tallyPushes(row, received.filter((message) => (JSON.parse(message.plaintext.toString()) as { title: string }).title === title));
      if (wrong !== undefined) row.problems.push(`subscriber ${subscriberId}: "${title}": ${wrong} (run ${JSON.stringify(own)})`);
    }
  }
  const strangers = runs.filter((run) => ![...welcomed.values()].some((welcome) => welcome.subscriberId === run.subscriberId));
  if (strangers.length > 0) runProblems.push(`welcome runs of subscriptions no accepted request made: ${JSON.stringify(strangers)}`);

  // Pushes: each subscriber each notification exactly once; and nothing the drill did not have accepted.
  const endpoints = new Set(audience.subscribers.map((subscriber) => subscriber.endpoint));
  const subscriberOf = new Map(audience.subscribers.map((subscriber) => [subscriber.endpoint, subscriber.id]));
  for (const [id, tracked] of notifications) {
    const row = rowAt(tracked.at);
    const pushes = countPushes(id);
    for (const endpoint of endpoints) {
      const wrong = tallyPushes(row, pushes.get(endpoint) ?? []);
      if (wrong !== undefined) row.problems.push(`${id} to subscriber ${subscriberOf.get(endpoint)}: ${wrong}${pushes.has(endpoint) ? '' : `, recorded as ${await recipientRecord(id, subscriberOf.get(endpoint))}`}`);
    }
  }
  const unknown = new Set(
    peer
      .received(undefined, { includeReplaced: true })
      .filter((message) => !flowEndpoints.has(message.endpoint))
      .map((message) => harness.openPush(message).payload.notificationId)
      .filter((id) => !notifications.has(id)),
  );
  if (unknown.size > 0) runProblems.push(`pushes of ${unknown.size} notifications no accepted request made: ${[...unknown].join(', ')}`);

  // Engagement: the campaign counters equal the distinct accepted reports.
  const expected = new Map<string, { impression: number; click: number; at: number }>();
  for (const accepted of acceptedReports.values()) {
    const entry = expected.get(accepted.notificationId) ?? { impression: 0, click: 0, at: accepted.at };
    entry[accepted.kind] += 1;
    entry.at = Math.max(entry.at, accepted.at);
    expected.set(accepted.notificationId, entry);
  }
  for (const [id, tracked] of notifications) {
    if (tracked.question) continue;
    const want = expected.get(id) ?? { impression: 0, click: 0, at: notifications.get(id)?.at ?? 0 };
    const row = rowAt(want.at);
    const stats = await settings.step(
      `reading the stats of ${id}`,
      REQUEST_DEADLINE_MS,
      call<{ totalDelivered: number; totalClicked: number }>(pool[0] as string, `${SERVER_API}/campaigns/${id}/stats`, { key: apiKey, timeoutMs: REQUEST_DEADLINE_MS }),
    );
    if (stats.status !== 200) {
      row.problems.push(`stats of ${id}: ${stats.status}`);
      continue;
    }
    for (const [counted, wanted] of [
      [stats.body.totalDelivered, want.impression],
      [stats.body.totalClicked, want.click],
    ] as const) {
      if (counted < wanted) row.lost += wanted - counted;
      if (counted > wanted) row.duplicated += counted - wanted;
    }
    if (stats.body.totalDelivered !== want.impression || stats.body.totalClicked !== want.click) {
      row.problems.push(`${id}: counted ${stats.body.totalDelivered} impressions and ${stats.body.totalClicked} clicks for ${want.impression} and ${want.click} accepted`);
    }
  }

  // Questions: each answered once (its record holds one answer), its answer readable, its waiter woken (or it reads the answer now).
  let readAfterwards = 0;
  for (const question of questions) {
    const row = rowAt(question.at);
    const record = await settings.step(
      `reading question ${question.id}'s record`,
      REQUEST_DEADLINE_MS,
      call<{ data: { kind: string }[] }>(pool[0] as string, `${SERVER_API}/ask/${question.id}/events`, { key: apiKey, timeoutMs: REQUEST_DEADLINE_MS }),
    );
    if (record.status !== 200) row.problems.push(`question ${question.id}'s record reads ${record.status} ${JSON.stringify(record.body)}`);
    const answers = record.status === 200 ? record.body.data.filter((entry) => entry.kind === 'answered').length : 0;
    if (answers > 1) row.duplicated += answers - 1;
    const read = await settings.step(
      `reading question ${question.id}`,
      REQUEST_DEADLINE_MS,
      call<{ answered: boolean; value?: string }>(pool[0] as string, `${SERVER_API}/ask/${question.id}`, { key: apiKey, timeoutMs: REQUEST_DEADLINE_MS }),
    );
    if (read.status !== 200 || read.body.answered !== true || read.body.value !== 'yes') {
      row.lost += 1;
      row.problems.push(`question ${question.id} reads ${read.status} ${JSON.stringify(read.body)}`);
    }
    else if (question.waiter !== 'woken') readAfterwards += 1;
  }

  for (const running of [...stack.gateways, ...stack.services]) {
    if (!killed.has(running) && isDown(running)) runProblems.push(`a process exited by itself:\n${running.output().slice(-2_000)}`);
  }

  // Each fault's own checks.
  for (const row of rows) if (row.fault !== 'none') FAULT_MODULES[row.fault].reconcile?.(load, row);

  const all = [...rows, calm];
  return {
    rows: all,
    totals: {
      requests: all.reduce((sum, row) => sum + row.requests, 0),
      notifications: notifications.size,
      pushes: peer.received(undefined, { includeReplaced: true }).length,
      reports: acceptedReports.size,
      questions: questions.length,
      questionPushes: [...notifications.values()].filter((tracked) => tracked.question).length,
      wokenWaiters: questions.filter((question) => question.waiter === 'woken').length,
      readAfterwards,
    },
    problems: [...all.flatMap((row) => row.problems.map((problem) => `${row.fault}: ${problem}`)), ...runProblems],
    durationMs: Date.now() - settings.started,
  };
}
