import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';

import {
  call,
  connectDatabase,
  createKey,
  createWorkspace,
  errorBody,
  eventually,
  SERVER_API,
  slackInteractionRequest,
  startSlackPeer,
  startStack,
  type SlackPeer,
  type SlackTeam,
  type Stack,
  type TestWorkspace,
} from '@herald/testkit';

// Slack end to end: a workspace connects its Slack app (PUT /channels/slack, checked with
// auth.test), a question is posted to its default channel with Block Kit, a click on the message
// (a signed interaction, exactly as Slack sends it) answers it and wakes the waiting caller, the
// message is updated to show the answer, and a second click gets an ephemeral note. Slack is the
// strict Web API peer of @herald/testkit; everything else is the real stack.

let stack: Stack;
let peer: SlackPeer;
before(async () => {
  peer = await startSlackPeer();
  stack = await startStack({
    decisions: true,
    env: {
      CHANNEL_SECRET_KEYS: `k2:${randomBytes(32).toString('base64')},k1:${randomBytes(32).toString('base64')}`,
      SLACK_API_URL: peer.apiUrl,
      // A killed replica's claims pass to its replacement this soon (the crash test); still far longer than a call to the peer.
      QUESTION_DELIVERY_LEASE_MS: '10000',
    },
  });
});
after(async () => {
  await stack?.stop();
  await peer?.close();
});

const INTERACTIONS = '/api/v1/slack/interactions';
const CHANNEL = 'C0HERALD1';

interface Connection {
  teamId: string;
  teamName: string;
  botUserId: string;
  defaultChannel: string;
  connectedAt: string;
}

interface AnsweredBy {
  kind: string;
  id: string;
  displayName: string;
  channel: string;
  at: string;
}

interface Decision {
  decisionId: string;
  status: string;
  answer: string | null;
  approved: boolean;
  expiresAt: string;
  answeredAt: string | null;
  answeredBy: AnsweredBy | null;
}

const connect = (key: string, body: unknown) => call<Connection & { code?: string }>(stack.gatewayUrl, `${SERVER_API}/channels/slack`, { method: 'PUT', key, body });

/** A workspace with Slack connected to a fresh team of the peer (its default channel CHANNEL). */
async function connected(): Promise<{ workspace: TestWorkspace; team: SlackTeam }> {
  const workspace = await createWorkspace();
  const team = peer.addTeam([CHANNEL]);
  const response = await connect(workspace.apiKey, { botToken: team.botToken, signingSecret: team.signingSecret, defaultChannel: CHANNEL });
  assert.equal(response.status, 200, JSON.stringify(response.body));
  return { workspace, team };
}

async function openDecision(key: string, body: Record<string, unknown>): Promise<Decision> {
  const response = await call<Decision>(stack.gatewayUrl, `${SERVER_API}/decisions`, { method: 'POST', key, body });
  assert.equal(response.status, 200, JSON.stringify(response.body));
  return response.body;
}

const readDecision = (key: string, id: string, wait = false) => call<Decision>(stack.gatewayUrl, `${SERVER_API}/decisions/${id}${wait ? '?wait=true' : ''}`, { key });

/** The message posted for a question (waits for it). */
async function postedFor(questionId: string) {
  const [posted] = await peer.waitForCalls('chat.postMessage', 1, (c) => JSON.stringify(c.args.blocks).includes(`herald:${questionId}`));
  assert.ok(posted);
  return posted;
}

const slackTime = (iso: string) => `<!date^${Math.floor(Date.parse(iso) / 1_000)}^{date_short_pretty} at {time}|${iso}>`;
const plain = (text: string) => ({ type: 'plain_text', text, emoji: true });

/** A Slack user clicking a question's action, as Slack sends it. */
function clickPayload(team: SlackTeam, questionId: string, action: Record<string, unknown>, user = { id: 'U0ALICE', name: 'alice' }) {
  return {
    type: 'block_actions',
    team: { id: team.teamId, domain: team.teamName.toLowerCase() },
    user: { id: user.id, username: user.name, name: user.name, team_id: team.teamId },
    api_app_id: 'A0HERALD',
    token: 'deprecated-verification-token',
    container: { type: 'message', message_ts: '1700000000.000100', channel_id: CHANNEL, is_ephemeral: false },
    trigger_id: peer.triggerId(),
    channel: { id: CHANNEL, name: 'approvals' },
    response_url: 'https://hooks.slack.com/actions/T0/1/abc',
    actions: [{ block_id: `herald:${questionId}`, type: 'button', action_ts: '1700000001.000200', ...action }],
  };
}

const APPROVE = { action_id: 'herald_yes', value: 'yes', text: plain('Approve'), style: 'primary' };

function send(signed: { body: string; headers: Record<string, string> }) {
  return call<Record<string, unknown>>(stack.gatewayUrl, INTERACTIONS, { method: 'POST', rawBody: signed.body, headers: signed.headers });
}

const click = (team: SlackTeam, questionId: string, action: Record<string, unknown>, user?: { id: string; name: string }) =>
  send(slackInteractionRequest(team.signingSecret, clickPayload(team, questionId, action, user)));

async function storedConnection(workspaceId: string): Promise<{ bot_token: string; signing_secret: string } | undefined> {
  const db = await connectDatabase();
  try {
    const { rows } = await db.query<{ bot_token: string; signing_secret: string }>('SELECT bot_token, signing_secret FROM decision.slack_connections WHERE workspace_id = $1', [workspaceId]);
    return rows[0];
  } finally {
    await db.end();
  }
}

test('PUT /channels/slack checks the token with auth.test, stores the secrets sealed and never returns them; GET and DELETE', async () => {
  const workspace = await createWorkspace();
  const team = peer.addTeam([CHANNEL]);
  const path = `${SERVER_API}/channels/slack`;

  const none = await call(stack.gatewayUrl, path, { key: workspace.apiKey });
  assert.deepEqual(none, { ...none, status: 404, body: errorBody('not_found', 404, 'Not found', 'This workspace has no Slack connection.', 'Connect one with PUT /channels/slack.') });

  // A token Slack does not know: auth.test answers invalid_auth, and nothing is stored.
  const refused = await connect(workspace.apiKey, { botToken: 'xoxb-1-unknown', signingSecret: team.signingSecret, defaultChannel: CHANNEL });
  assert.equal(refused.status, 400);
  assert.deepEqual(
    refused.body,
    errorBody(
      'invalid_request',
      400,
      'Invalid Slack token',
      'Slack refused the bot token (auth.test: invalid_auth).',
      "Use the app's Bot User OAuth Token (xoxb-...) from its OAuth & Permissions page, after installing it to the workspace.",
      { fields: [{ field: 'botToken', in: 'body', problem: 'Slack answered invalid_auth' }] },
    ),
  );
  assert.equal(await storedConnection(workspace.workspaceId), undefined);

  const invalid = await connect(workspace.apiKey, { botToken: 'xoxp-user-token', signingSecret: 'short', defaultChannel: '#general', extra: 1 });
  assert.equal(invalid.status, 400);
  assert.equal(invalid.body.code, 'invalid_request');

  const response = await connect(workspace.apiKey, { botToken: team.botToken, signingSecret: team.signingSecret, defaultChannel: CHANNEL });
  assert.equal(response.status, 200, JSON.stringify(response.body));
  const expected = { teamId: team.teamId, teamName: team.teamName, botUserId: team.botUserId, defaultChannel: CHANNEL, connectedAt: response.body.connectedAt };
  assert.deepEqual(response.body, expected);
  assert.equal(peer.calls('auth.test').filter((c) => c.teamId === team.teamId).length, 1);

  // Sealed with the first key of CHANNEL_SECRET_KEYS: neither secret appears in the row.
  const stored = await storedConnection(workspace.workspaceId);
  assert.ok(stored);
  assert.match(stored.bot_token, /^k2:[A-Za-z0-9+/]+=*$/);
  assert.match(stored.signing_secret, /^k2:[A-Za-z0-9+/]+=*$/);
  assert.ok(!stored.bot_token.includes(team.botToken.slice(5)) && !stored.signing_secret.includes(team.signingSecret));

  const read = await call(stack.gatewayUrl, path, { key: workspace.apiKey });
  assert.equal(read.status, 200);
  assert.deepEqual(read.body, expected);

  // Another workspace cannot read it (its own has none), nor connect the same Slack team.
  const other = await createWorkspace();
  assert.equal((await call(stack.gatewayUrl, path, { key: other.apiKey })).status, 404);
  const taken = await connect(other.apiKey, { botToken: team.botToken, signingSecret: team.signingSecret, defaultChannel: CHANNEL });
  assert.deepEqual(taken.body, errorBody('conflict', 409, 'Slack team taken', 'Another Herald workspace has connected this Slack team.', 'Disconnect it there first.'));

  // A runtime key (an agent's) may not touch the workspace's secrets.
  const runtime = await createKey(workspace.workspaceId, 'runtime');
  assert.equal((await call(stack.gatewayUrl, path, { key: runtime.apiKey })).status, 403);

  const removed = await call(stack.gatewayUrl, path, { method: 'DELETE', key: workspace.apiKey });
  assert.equal(removed.status, 204);
  assert.equal((await call(stack.gatewayUrl, path, { key: workspace.apiKey })).status, 404);
  assert.equal((await call(stack.gatewayUrl, path, { method: 'DELETE', key: workspace.apiKey })).status, 404);
});

test('a confirm decision is posted to the default channel: the question, its context, the tool call, who asks, the time left, Approve/Reject', async () => {
  const { workspace, team } = await connected();
  const decision = await openDecision(workspace.apiKey, {
    question: 'Deploy release 4.2 to production?',
    context: 'CI is green on <main> & the canary is healthy.',
    agentName: 'deploy-bot',
    toolName: 'deploy',
    toolTarget: 'prod-eu',
    parameters: { canary: false, version: '4.2' },
  });
  const posted = await postedFor(decision.decisionId);
  assert.equal(posted.teamId, team.teamId);
  assert.deepEqual(posted.args, {
    channel: CHANNEL,
    text: 'deploy-bot asks: Deploy release 4.2 to production?',
    blocks: [
      { type: 'section', text: { type: 'mrkdwn', text: '*Deploy release 4.2 to production?*' } },
      { type: 'section', text: { type: 'mrkdwn', text: 'CI is green on &lt;main&gt; &amp; the canary is healthy.' } },
      {
        type: 'section',
        fields: [
          { type: 'mrkdwn', text: '*Tool*\n`deploy`' },
          { type: 'mrkdwn', text: '*Target*\n`prod-eu`' },
        ],
      },
      { type: 'section', text: { type: 'mrkdwn', text: '*Parameters*\n```{\n  "canary": false,\n  "version": "4.2"\n}```' } },
      { type: 'context', elements: [{ type: 'mrkdwn', text: `*deploy-bot* asks with key \`Default dashboard key (${workspace.keyId})\` · answer by ${slackTime(decision.expiresAt)}` }] },
      {
        type: 'actions',
        block_id: `herald:${decision.decisionId}`,
        elements: [
          { type: 'button', action_id: 'herald_yes', text: plain('Approve'), value: 'yes', style: 'primary' },
          { type: 'button', action_id: 'herald_no', text: plain('Reject'), value: 'no' },
        ],
      },
    ],
  });
});

test('a decision service killed -9 while it updates the message after a click: the answer stands, once, and its replacement updates the message', async () => {
  const { workspace, team } = await connected();
  const decision = await openDecision(workspace.apiKey, { question: 'Restart the queue workers?' });
  const posted = await postedFor(decision.decisionId);
  const updating = peer.holdNext('chat.update');
  assert.equal((await click(team, decision.decisionId, APPROVE)).status, 200);
  // The answer is committed and the update is on its way to Slack: the process dies now.
  assert.equal((await updating).ts, posted.response.ts);
  const victim = stack.services.find((service) => service.child.exitCode === null && service.child.signalCode === null && service.output().includes('decision service serving'));
  if (!victim) throw new Error('no decision service running');
  victim.child.kill('SIGKILL');
  await victim.exited;
  await stack.startService('decision', {}, { replacing: true });

  const [update] = await peer.waitForCalls('chat.update', 1, (c) => c.args.ts === posted.response.ts, 60_000);
  const answered = await readDecision(workspace.apiKey, decision.decisionId);
  assert.deepEqual([answered.body.status, answered.body.answer, answered.body.answeredBy?.id], ['answered', 'yes', 'U0ALICE']);
  const line = `:white_check_mark: Approved by <@U0ALICE> · ${slackTime(answered.body.answeredAt ?? '')}`;
  assert.deepEqual(update?.args, {
    channel: CHANNEL,
    ts: posted.response.ts,
    text: `Restart the queue workers?: ${line}`,
    blocks: [
      { type: 'section', text: { type: 'mrkdwn', text: '*Restart the queue workers?*' } },
      { type: 'context', elements: [{ type: 'mrkdwn', text: line }] },
    ],
  });
  const events = await call<{ data: Array<{ kind: string }> }>(stack.gatewayUrl, `${SERVER_API}/decisions/${decision.decisionId}/events`, { key: workspace.apiKey });
  assert.deepEqual(
    events.body.data.map((event) => event.kind).filter((kind) => kind === 'answered' || kind === 'refused'),
    ['answered'],
  );
  const db = await connectDatabase();
  try {
    const { rows } = await db.query<{ state: string }>('SELECT state FROM decision.slack_messages WHERE question_id = $1', [decision.decisionId]);
    assert.deepEqual(rows, [{ state: 'updated' }]);
  } finally {
    await db.end();
  }
});

test('select questions get buttons (up to 5 options) or a static select; input questions a button opening a modal', async () => {
  const { workspace } = await connected();
  const few = await openDecision(workspace.apiKey, { question: 'Which region?', type: 'select', options: ['eu', 'us', 'ap'] });
  const many = await openDecision(workspace.apiKey, { question: 'Which day?', type: 'select', options: ['mon', 'tue', 'wed', 'thu', 'fri', 'sat'] });
  const input = await openDecision(workspace.apiKey, { question: 'Release notes?', type: 'input', placeholder: 'One line' });
  const actions = async (id: string) => ((await postedFor(id)).args.blocks as unknown[]).at(-1);
  assert.deepEqual(await actions(few.decisionId), {
    type: 'actions',
    block_id: `herald:${few.decisionId}`,
    elements: ['eu', 'us', 'ap'].map((option, index) => ({ type: 'button', action_id: `herald_option_${index}`, text: plain(option), value: String(index) })),
  });
  assert.deepEqual(await actions(many.decisionId), {
    type: 'actions',
    block_id: `herald:${many.decisionId}`,
    elements: [
      {
        type: 'static_select',
        action_id: 'herald_select',
        placeholder: plain('Choose an answer'),
        options: ['mon', 'tue', 'wed', 'thu', 'fri', 'sat'].map((option, index) => ({ text: plain(option), value: String(index) })),
      },
    ],
  });
  assert.deepEqual(await actions(input.decisionId), {
    type: 'actions',
    block_id: `herald:${input.decisionId}`,
    elements: [{ type: 'button', action_id: 'herald_input', text: plain('Answer…'), value: 'input', style: 'primary' }],
  });
});

test('Approve answers the decision and wakes the waiting caller; the message is updated; a second click gets an ephemeral note', async () => {
  const { workspace, team } = await connected();
  const decision = await openDecision(workspace.apiKey, { question: 'Rotate the database password?' });
  const posted = await postedFor(decision.decisionId);
  const waiting = readDecision(workspace.apiKey, decision.decisionId, true);

  const clicked = await click(team, decision.decisionId, APPROVE);
  assert.equal(clicked.status, 200);
  assert.equal(clicked.body, '');

  const answered = await waiting;
  assert.equal(answered.status, 200);
  assert.equal(answered.body.status, 'answered');
  assert.equal(answered.body.answer, 'yes');
  assert.equal(answered.body.approved, true);
  assert.deepEqual(answered.body.answeredBy, { kind: 'slack', id: 'U0ALICE', displayName: 'alice', channel: 'slack', at: answered.body.answeredAt });

  const [update] = await peer.waitForCalls('chat.update', 1, (c) => c.args.ts === posted.response.ts);
  assert.ok(update);
  const line = `:white_check_mark: Approved by <@U0ALICE> · ${slackTime(answered.body.answeredAt ?? '')}`;
  assert.deepEqual(update.args, {
    channel: CHANNEL,
    ts: posted.response.ts,
    text: `Rotate the database password?: ${line}`,
    blocks: [
      { type: 'section', text: { type: 'mrkdwn', text: '*Rotate the database password?*' } },
      { type: 'context', elements: [{ type: 'mrkdwn', text: line }] },
    ],
  });

  const again = await click(team, decision.decisionId, { action_id: 'herald_no', value: 'no', text: plain('Reject') }, { id: 'U0BOB', name: 'bob' });
  assert.equal(again.status, 200);
  const [note] = await peer.waitForCalls('chat.postEphemeral', 1, (c) => c.args.user === 'U0BOB' && c.teamId === team.teamId);
  assert.deepEqual(note?.args, { channel: CHANNEL, user: 'U0BOB', text: 'This question was already answered by <@U0ALICE>: :white_check_mark: Approved.' });
  assert.equal((await readDecision(workspace.apiKey, decision.decisionId)).body.answer, 'yes');
});

test('an input question is answered through the modal: views.open with the trigger id, then the submission', async () => {
  const { workspace, team } = await connected();
  const decision = await openDecision(workspace.apiKey, { question: 'Release notes?', type: 'input', placeholder: 'One line' });
  await postedFor(decision.decisionId);
  const payload = clickPayload(team, decision.decisionId, { action_id: 'herald_input', value: 'input', text: plain('Answer…'), style: 'primary' });
  const opened = await send(slackInteractionRequest(team.signingSecret, payload));
  assert.equal(opened.status, 200);
  const [modal] = await peer.waitForCalls('views.open', 1, (c) => c.args.trigger_id === payload.trigger_id);
  assert.deepEqual(modal?.args, {
    trigger_id: payload.trigger_id,
    view: {
      type: 'modal',
      callback_id: 'herald_input',
      private_metadata: decision.decisionId,
      title: plain('Answer'),
      submit: plain('Send'),
      close: plain('Cancel'),
      blocks: [
        { type: 'section', text: { type: 'mrkdwn', text: '*Release notes?*' } },
        {
          type: 'input',
          block_id: 'answer',
          label: plain('Your answer'),
          element: { type: 'plain_text_input', action_id: 'answer', multiline: true, max_length: 2000, placeholder: plain('One line') },
        },
      ],
    },
  });

  const submission = (value: string) => ({
    type: 'view_submission',
    team: { id: team.teamId, domain: team.teamName.toLowerCase() },
    user: { id: 'U0ALICE', username: 'alice', name: 'alice', team_id: team.teamId },
    api_app_id: 'A0HERALD',
    trigger_id: peer.triggerId(),
    view: {
      id: 'V0MODAL',
      type: 'modal',
      callback_id: 'herald_input',
      private_metadata: decision.decisionId,
      state: { values: { answer: { answer: { type: 'plain_text_input', value } } } },
    },
  });
  const submitted = await send(slackInteractionRequest(team.signingSecret, submission('Fixes the login loop.')));
  assert.equal(submitted.status, 200);
  assert.equal(submitted.body, '');
  const read = await readDecision(workspace.apiKey, decision.decisionId);
  assert.equal(read.body.status, 'answered');
  assert.equal(read.body.answer, 'Fixes the login loop.');
  assert.deepEqual(read.body.answeredBy, { kind: 'slack', id: 'U0ALICE', displayName: 'alice', channel: 'slack', at: read.body.answeredAt });

  // A second submission keeps the modal open with Slack's error form.
  const late = await send(slackInteractionRequest(team.signingSecret, submission('Another answer')));
  assert.equal(late.status, 200);
  assert.deepEqual(late.body, { response_action: 'errors', errors: { answer: 'This question was already answered by <@U0ALICE>: :speech_balloon: Answered “Fixes the login loop.”.' } });
});

test('a 429 from Slack is retried after its Retry-After, then posted once', async () => {
  const { workspace } = await connected();
  peer.rateLimitNext('chat.postMessage', 1);
  const startedAt = Date.now();
  const decision = await openDecision(workspace.apiKey, { question: 'Scale the cluster?' });
  const posted = await postedFor(decision.decisionId);
  assert.ok(posted.at - startedAt >= 1_000, `posted ${posted.at - startedAt} ms after the open, before the Retry-After`);
  const db = await connectDatabase();
  try {
    // Recorded once the decision service has Slack's answer (just after the peer gave it).
    const delivery = async () => (await db.query(`SELECT state, attempts, result FROM decision.question_deliveries WHERE question_id = $1 AND channel = 'slack'`, [decision.decisionId])).rows;
    const rows = await eventually('the slack delivery recorded', delivery, (found) => found[0]?.state !== 'pending');
    assert.deepEqual(rows, [{ state: 'delivered', attempts: 2, result: `${CHANNEL}:${String(posted.response.ts)}` }]);
  } finally {
    await db.end();
  }
  assert.equal(peer.calls('chat.postMessage').filter((c) => JSON.stringify(c.args.blocks).includes(decision.decisionId)).length, 1);
});

test('forged, replayed, stale and foreign interactions, and unknown actions, are refused and change nothing', async () => {
  const { workspace, team } = await connected();
  const other = await connected();
  const decision = await openDecision(workspace.apiKey, { question: 'Delete the staging bucket?' });
  await postedFor(decision.decisionId);
  const payload = clickPayload(team, decision.decisionId, APPROVE);
  const now = Math.floor(Date.now() / 1_000);
  const invalidSignature = errorBody(
    'unauthorized',
    401,
    'Invalid signature',
    'The Slack request signature does not verify.',
    "Slack signs each request with the app's signing secret (X-Slack-Signature, v0); the request must reach Herald within 5 minutes, unchanged.",
  );

  const signed = slackInteractionRequest(team.signingSecret, payload);
  const cases: Array<[string, { body: string; headers: Record<string, string> }, number, unknown]> = [
    ['a forged signature', { body: signed.body, headers: { ...signed.headers, 'x-slack-signature': `v0=${'0'.repeat(64)}` } }, 401, invalidSignature],
    ['signed with another secret', slackInteractionRequest(randomBytes(16).toString('hex'), payload), 401, invalidSignature],
    ['a changed body', { body: `${signed.body}%20`, headers: signed.headers }, 401, invalidSignature],
    ['no signature', { body: signed.body, headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-slack-request-timestamp': String(now) } }, 401, invalidSignature],
    ['a replay (correctly signed 6 minutes ago)', slackInteractionRequest(team.signingSecret, payload, now - 360), 401, invalidSignature],
    ['a timestamp from the future', slackInteractionRequest(team.signingSecret, payload, now + 360), 401, invalidSignature],
    ['a Slack team not connected', slackInteractionRequest(team.signingSecret, { ...payload, team: { id: 'T0NOBODY' }, user: { ...payload.user, team_id: 'T0NOBODY' } }), 401, invalidSignature],
    [
      "another connected team's valid request for this workspace's question",
      slackInteractionRequest(other.team.signingSecret, clickPayload(other.team, decision.decisionId, APPROVE)),
      404,
      errorBody('not_found', 404, 'Not found', 'No such question.', 'Check the path and the identifier.'),
    ],
    [
      'an unknown action id',
      slackInteractionRequest(team.signingSecret, clickPayload(team, decision.decisionId, { action_id: 'herald_approve_all', value: 'yes' })),
      400,
      errorBody('invalid_request', 400, 'Unsupported Slack request', 'Unknown action "herald_approve_all" for this question.', 'Fix the request as the message says and send it again.'),
    ],
    [
      'an unknown interaction type',
      slackInteractionRequest(team.signingSecret, { ...payload, type: 'shortcut' }),
      400,
      errorBody('invalid_request', 400, 'Unsupported Slack request', 'Herald does not handle Slack "shortcut" requests.', 'Fix the request as the message says and send it again.'),
    ],
    [
      'no payload',
      { body: 'foo=bar', headers: slackInteractionRequest(team.signingSecret, payload).headers },
      400,
      errorBody('invalid_request', 400, 'Unsupported Slack request', 'The body has no payload field (application/x-www-form-urlencoded payload=<JSON>).', 'Fix the request as the message says and send it again.'),
    ],
  ];
  for (const [what, request, status, body] of cases) {
    const response = await send(request);
    assert.equal(response.status, status, `${what}: ${JSON.stringify(response.body)}`);
    assert.deepEqual(response.body, body, what);
  }
  const read = await readDecision(workspace.apiKey, decision.decisionId);
  assert.equal(read.body.status, 'pending');
  assert.equal(peer.calls('chat.update').filter((c) => c.teamId === team.teamId).length, 0);
  assert.equal(peer.calls('chat.postEphemeral').filter((c) => c.teamId === team.teamId).length, 0);
});

/** The kinds and actors of a question's record, in order. */
async function recordOf(questionId: string): Promise<Array<{ kind: string; actor: Record<string, unknown> | null }>> {
  const db = await connectDatabase();
  try {
    const { rows } = await db.query<{ kind: string; actor: Record<string, unknown> | null }>('SELECT kind, actor FROM decision.question_events WHERE question_id = $1 ORDER BY seq', [questionId]);
    return rows;
  } finally {
    await db.end();
  }
}

test('a named Slack approver gets a direct message; a click by anyone else is refused (403), noted to them, recorded as refused, and changes nothing', async () => {
  const { workspace, team } = await connected();
  const decision = await openDecision(workspace.apiKey, { question: 'Wire 12,000 EUR to ACME?', approvers: [{ kind: 'slack', id: 'U0CFO' }] });
  const [dm] = await peer.waitForCalls('chat.postMessage', 1, (c) => JSON.stringify(c.args.blocks).includes(`herald:${decision.decisionId}`));
  assert.equal(dm?.args.channel, 'D0CFO');
  assert.deepEqual(
    peer.calls('conversations.open').filter((c) => c.teamId === team.teamId).map((c) => c.args),
    [{ users: 'U0CFO' }],
  );
  // Named approvers replace the default channel: nothing is posted there.
  assert.equal(peer.calls('chat.postMessage').filter((c) => c.teamId === team.teamId && c.args.channel === CHANNEL).length, 0);

  const refused = await click(team, decision.decisionId, APPROVE, { id: 'U0INTERN', name: 'intern' });
  assert.equal(refused.status, 403);
  assert.deepEqual(
    refused.body,
    errorBody('forbidden', 403, 'Not an approver', 'Only the approvers this decision names may answer it.', 'Answer through a link or message sent to one of its approvers, or with a key it names.'),
  );
  const [note] = await peer.waitForCalls('chat.postEphemeral', 1, (c) => c.teamId === team.teamId);
  assert.deepEqual(note?.args, { channel: CHANNEL, user: 'U0INTERN', text: 'You are not among the approvers of this question; your answer was not taken.' });
  assert.equal((await readDecision(workspace.apiKey, decision.decisionId)).body.status, 'pending');
  // The refused attempt is the record's only change (its delivery's entry may land before or after it).
  const entries = await recordOf(decision.decisionId);
  assert.deepEqual(
    entries.filter((entry) => entry.kind !== 'delivered').map((entry) => [entry.kind, entry.kind === 'refused' ? entry.actor : null]),
    [
      ['opened', null],
      ['refused', { kind: 'slack', id: 'U0INTERN', displayName: 'intern', channel: 'slack' }],
    ],
  );

  const approved = await click(team, decision.decisionId, APPROVE, { id: 'U0CFO', name: 'cfo' });
  assert.equal(approved.status, 200);
  const read = await readDecision(workspace.apiKey, decision.decisionId);
  assert.deepEqual([read.body.status, read.body.answer, read.body.answeredBy?.id], ['answered', 'yes', 'U0CFO']);
});

test('an answer given elsewhere (the API) and a cancellation update the Slack message too', async () => {
  const { workspace } = await connected();
  const byKey = await openDecision(workspace.apiKey, { question: 'Purge the CDN cache?' });
  const cancelled = await openDecision(workspace.apiKey, { question: 'Restart the queue workers?' });
  const [postedA, postedB] = [await postedFor(byKey.decisionId), await postedFor(cancelled.decisionId)];

  const answered = await call<Decision>(stack.gatewayUrl, `${SERVER_API}/decisions/${byKey.decisionId}`, { method: 'POST', key: workspace.apiKey, body: { answer: false } });
  assert.equal(answered.status, 200);
  const by = answered.body.answeredBy;
  assert.ok(by);
  const [updateA] = await peer.waitForCalls('chat.update', 1, (c) => c.args.ts === postedA.response.ts);
  assert.deepEqual(updateA?.args.blocks, [
    { type: 'section', text: { type: 'mrkdwn', text: '*Purge the CDN cache?*' } },
    { type: 'context', elements: [{ type: 'mrkdwn', text: `:x: Rejected by ${by.displayName} · ${slackTime(answered.body.answeredAt ?? '')}` }] },
  ]);

  const withdrawn = await call<Decision & { cancelledAt: string }>(stack.gatewayUrl, `${SERVER_API}/decisions/${cancelled.decisionId}`, { method: 'DELETE', key: workspace.apiKey });
  assert.equal(withdrawn.status, 200);
  const [updateB] = await peer.waitForCalls('chat.update', 1, (c) => c.args.ts === postedB.response.ts);
  assert.deepEqual(updateB?.args.blocks, [
    { type: 'section', text: { type: 'mrkdwn', text: '*Restart the queue workers?*' } },
    { type: 'context', elements: [{ type: 'mrkdwn', text: `:no_entry_sign: Cancelled · ${slackTime(withdrawn.body.cancelledAt)}` }] },
  ]);
});
