import { createHmac, timingSafeEqual } from 'node:crypto';

import { backoffMs } from '@herald/backoff';
import type { Pool } from '@herald/db';
import { HeraldError } from '@herald/errors';
import { implementService } from '@herald/grpc';
import type { Logger } from '@herald/logging';
import { SlackServiceService, type HandleSlackInteractionRequest, type HandleSlackInteractionResponse, type SlackConnection } from '@herald/proto/herald/decision/v1/slack';
import { WebAPIPlatformError, WebAPIRateLimitedError, WebClient } from '@slack/web-api';
import { retryWhileUnreachable, startWorkLoop, type WorkLoop } from '@herald/workloop';

import type { Answering } from './answering.js';
import type { Channel } from './deliveries.js';
import type { SecretBox } from './sealed-secrets.js';
import { ACTIONS, alreadyEnded, BLOCK_PREFIX, endedMessage, INPUT_MODAL, inputModal, openMessage } from './slack-blocks.js';
import * as store from './store.js';

/**
 * Slack, one of a question's channels: the workspace's connection (its app's bot token and signing
 * secret, sealed at rest), the posting of a question (a delivery: `channel:<id>` or `user:<id>`),
 * Slack's interactivity requests (a click or a modal's submission answers the question as the Slack
 * user), and the update of each posted message once its question ended (a durable work table).
 */

/** Slack signs a request with its time; one older or newer than this is refused (a replay). */
export const SIGNATURE_WINDOW_SECONDS = 300;

export interface SlackDeps {
  pool: Pool;
  logger: Logger;
  secrets: SecretBox;
  /** SLACK_API_URL: Slack's Web API base (tests point it at the testkit's peer). */
  apiUrl: string;
}

/** A Web API client of one bot token: no retries of its own (429s come back as retryAt), absolute URLs refused. */
function webClient({ apiUrl }: SlackDeps, token: string): WebClient {
  return new WebClient(token, { slackApiUrl: apiUrl, retryConfig: { retries: 0 }, rejectRateLimitedCalls: true, allowAbsoluteUrls: false, timeout: 10_000 });
}

const connectionView = (row: store.SlackConnectionRow): SlackConnection => ({
  teamId: row.team_id,
  teamName: row.team_name,
  botUserId: row.bot_user_id,
  defaultChannel: row.default_channel,
  connectedAt: row.connected_at.toISOString(),
});

const notConnected = () => new HeraldError('not_found', 'This workspace has no Slack connection.', { title: 'Not found', hint: 'Connect one with PUT /channels/slack.' });

/** Connect, read and disconnect a workspace's Slack app. */
export function slackConnections(deps: SlackDeps) {
  return {
    async connect(workspaceId: string, botToken: string, signingSecret: string, defaultChannel: string): Promise<SlackConnection> {
      if (!workspaceId) throw new HeraldError('invalid_request', 'workspace_id is required');
      let identity;
      try {
        identity = await webClient(deps, botToken).auth.test();
      } catch (err) {
        if (err instanceof WebAPIPlatformError) {
          throw new HeraldError('invalid_request', `Slack refused the bot token (auth.test: ${err.data.error}).`, {
            title: 'Invalid Slack token',
            hint: "Use the app's Bot User OAuth Token (xoxb-...) from its OAuth & Permissions page, after installing it to the workspace.",
            extra: { fields: [{ field: 'botToken', in: 'body', problem: `Slack answered ${err.data.error}` }] },
          });
        }
        throw new HeraldError('unavailable', 'Slack could not be reached to check the token; try again.');
      }
      const row = await store.upsertSlackConnection(deps.pool, {
        workspace_id: workspaceId,
        team_id: identity.team_id ?? '',
        team_name: identity.team ?? '',
        bot_user_id: identity.user_id ?? '',
        default_channel: defaultChannel,
        bot_token: deps.secrets.seal(botToken),
        signing_secret: deps.secrets.seal(signingSecret),
      });
      if (!row) throw new HeraldError('conflict', 'Another Herald workspace has connected this Slack team.', { title: 'Slack team taken', hint: 'Disconnect it there first.' });
      deps.logger.info({ workspaceId, teamId: row.team_id }, 'slack connected');
      return connectionView(row);
    },

    async get(workspaceId: string): Promise<SlackConnection> {
      const row = await store.findSlackConnection(deps.pool, workspaceId);
      if (!row) throw notConnected();
      return connectionView(row);
    },

    async disconnect(workspaceId: string): Promise<void> {
      if (!(await store.deleteSlackConnection(deps.pool, workspaceId))) throw notConnected();
      deps.logger.info({ workspaceId }, 'slack disconnected');
    },
  };
}

/** A Slack call's failure as a delivery outcome: a 429 waits for its Retry-After, a refusal fails for good; anything else is thrown (retried with backoff). */
function slackFailure(err: unknown): store.DeliveryOutcome {
  if (err instanceof WebAPIRateLimitedError) return { state: 'pending', error: 'rate limited by Slack', retryAt: new Date(Date.now() + err.retryAfter * 1_000) };
  if (err instanceof WebAPIPlatformError) return { state: 'failed', error: `Slack refused: ${err.data.error}` };
  throw err;
}

/** The Slack channel of question deliveries: posts the question to `channel:<id>` or, as a direct message, to `user:<id>`. */
export function slackChannel(deps: SlackDeps): Channel {
  return {
    async deliver(question: store.QuestionRow, target: string): Promise<store.DeliveryOutcome> {
      const connection = await store.findSlackConnection(deps.pool, question.workspace_id);
      if (!connection) return { state: 'failed', error: 'the workspace has no Slack connection' };
      const client = webClient(deps, deps.secrets.open(connection.bot_token));
      const [kind, id = ''] = target.split(':');
      try {
        const channel = kind === 'user' ? ((await client.conversations.open({ users: id })).channel?.id ?? '') : id;
        const posted = await client.chat.postMessage({ channel, ...openMessage(question) });
        const ts = posted.ts ?? '';
        await store.insertSlackMessage(deps.pool, { question_id: question.id, workspace_id: question.workspace_id, channel_id: posted.channel ?? channel, ts });
        return { state: 'delivered', result: `${posted.channel ?? channel}:${ts}`, reached: 1 };
      } catch (err) {
        return slackFailure(err);
      }
    },
  };
}

/**
 * Updates each posted message once its question ended (answered, cancelled, expired), on the shared
 * work loop: a message is due at its question's expiry, sooner once it is answered. A message whose
 * question is still open is looked at again at its expiry.
 */
export function startSlackUpdates(deps: SlackDeps & { retry: { baseMs: number; capMs: number }; pollMs: number; leaseMs: number }): WorkLoop {
  async function update(row: store.ClaimedSlackMessage): Promise<{ state: 'updated' } | { state: 'pending'; dueAt: Date }> {
    const question = await store.findQuestion(deps.pool, row.question_id, {});
    if (question && question.status === 'pending' && !question.expired) return { state: 'pending', dueAt: question.expires_at };
    const connection = await store.findSlackConnection(deps.pool, row.workspace_id);
    if (!question || !connection) return { state: 'updated' };
    try {
      await webClient(deps, deps.secrets.open(connection.bot_token)).chat.update({ channel: row.channel_id, ts: row.ts, ...endedMessage(question) });
      return { state: 'updated' };
    } catch (err) {
      if (err instanceof WebAPIRateLimitedError) return { state: 'pending', dueAt: new Date(Date.now() + err.retryAfter * 1_000) };
      // The message is gone (deleted, the bot removed from the channel): nothing left to update.
      if (err instanceof WebAPIPlatformError) {
        deps.logger.warn({ questionId: row.question_id, error: err.data.error }, 'slack refused a message update; it is left as it is');
        return { state: 'updated' };
      }
      deps.logger.warn({ err, questionId: row.question_id, attempt: row.attempts }, 'a slack message update failed; it is tried again after a backoff');
      return { state: 'pending', dueAt: new Date(Date.now() + backoffMs(row.attempts, deps.retry)) };
    }
  }

  return startWorkLoop<store.ClaimedSlackMessage>({
    name: 'slack message updates',
    pool: deps.pool,
    logger: deps.logger,
    table: store.DUE_SLACK_MESSAGES,
    channel: store.SLACK_MESSAGES_CHANNEL,
    leaseMs: deps.leaseMs,
    batchSize: 1,
    // Off the answer's path (the message shows the outcome after the commit), so it must not
    // compete with answers: at 8 at once its bursts after each answer (two reads, the Slack call,
    // the record) took the pool and the CPU the next clicks needed, and a click's wake-up took 8x
    // longer under load (loadtest/README.md, "Where answers queued").
    concurrency: 2,
    pollMs: deps.pollMs,
    async work([row], token) {
      if (!row) return;
      const next = await update(row);
      await retryWhileUnreachable(() => store.recordSlackMessage(deps.pool, row, token, next), deps.leaseMs);
    },
  });
}

/** What an interaction payload carries that Herald reads (block_actions and view_submission). */
interface InteractionPayload {
  type?: string;
  team?: { id?: string } | null;
  user?: { id?: string; name?: string; username?: string; team_id?: string };
  channel?: { id?: string };
  trigger_id?: string;
  actions?: Array<{ action_id?: string; block_id?: string; value?: string; selected_option?: { value?: string } }>;
  view?: { callback_id?: string; private_metadata?: string; state?: { values?: Record<string, Record<string, { value?: string | null }>> } };
}

const unauthenticated = () =>
  new HeraldError('unauthorized', 'The Slack request signature does not verify.', {
    title: 'Invalid signature',
    hint: "Slack signs each request with the app's signing secret (X-Slack-Signature, v0); the request must reach Herald within 5 minutes, unchanged.",
  });

const badRequest = (message: string) => new HeraldError('invalid_request', message, { title: 'Unsupported Slack request' });

/** Whether Slack's request timestamp (seconds) is within the window of now. */
const inWindow = (timestamp: string): boolean => /^\d{1,12}$/.test(timestamp) && Math.abs(Date.now() / 1_000 - Number(timestamp)) <= SIGNATURE_WINDOW_SECONDS;

/** Slack's v0 signature of a request: HMAC-SHA256 of `v0:<timestamp>:<raw body>` with the signing secret, compared in constant time. */
function verifySlackSignature(signingSecret: string | undefined, timestamp: string, rawBody: Buffer, signature: string): boolean {
  if (signingSecret === undefined) return false;
  const expected = Buffer.from(`v0=${createHmac('sha256', signingSecret).update(`v0:${timestamp}:`).update(rawBody).digest('hex')}`);
  const given = Buffer.from(signature);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

function parsePayload(rawBody: Buffer): InteractionPayload {
  const payload = new URLSearchParams(rawBody.toString('utf8')).get('payload');
  if (payload === null) throw badRequest('The body has no payload field (application/x-www-form-urlencoded payload=<JSON>).');
  try {
    const parsed: unknown = JSON.parse(payload);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not an object');
    return parsed as InteractionPayload;
  } catch {
    throw badRequest('The payload is not a JSON object.');
  }
}

/** The question and answer a click names; undefined for the input button (it opens the modal). */
function clickedAnswer(question: store.QuestionRow, action: NonNullable<InteractionPayload['actions']>[number]): string | undefined {
  const id = action.action_id ?? '';
  const option = (index: string | undefined): string => {
    const chosen = /^\d{1,2}$/.test(index ?? '') ? question.options[Number(index)] : undefined;
    if (chosen === undefined) throw badRequest('The selected option is not one of the question’s.');
    return chosen;
  };
  if (question.type === 'confirm' && id === ACTIONS.yes) return 'yes';
  if (question.type === 'confirm' && id === ACTIONS.no) return 'no';
  if (question.type === 'select' && id === `${ACTIONS.option}_${action.value ?? ''}`) return option(action.value);
  if (question.type === 'select' && id === ACTIONS.select) return option(action.selected_option?.value);
  if (question.type === 'input' && id === ACTIONS.input) return undefined;
  throw badRequest(`Unknown action "${id.slice(0, 100)}" for this question.`);
}

export interface InteractionDeps extends SlackDeps {
  /** The decision service's answering (approvers checked, refused attempts recorded, waiters woken). */
  answering: Answering;
}

/** Slack's interactivity requests: a click on a question's buttons or select, and the input modal's submission. */
export function slackInteractions(deps: InteractionDeps) {
  const { pool, logger } = deps;

  /** Tells one Slack user something only they see, in the channel of the message they clicked. */
  async function ephemeral(client: WebClient, payload: InteractionPayload, text: string): Promise<void> {
    const channel = payload.channel?.id;
    const user = payload.user?.id;
    if (!channel || !user) return;
    await client.chat.postEphemeral({ channel, user, text }).catch((err: unknown) => logger.warn({ err }, 'could not post an ephemeral slack message'));
  }

  /** Answers as the Slack user; HeraldErrors (not open, not an approver) are the caller's to turn into Slack's replies. */
  async function answerAs(payload: InteractionPayload, question: store.QuestionRow, answer: string): Promise<void> {
    const id = payload.user?.id;
    if (!id) throw badRequest('The payload names no Slack user.');
    await deps.answering.answer(question, answer, { kind: 'slack', id, displayName: payload.user?.name || payload.user?.username || id, channel: 'slack' });
    logger.info({ workspaceId: question.workspace_id, questionId: question.id, slackUser: id }, 'question answered in slack');
  }

  /** How a question that stopped being open while it was being answered ended (another click, another channel: the first answer stands). */
  const endedMeanwhile = async (question: store.QuestionRow): Promise<string> => alreadyEnded((await store.findQuestion(pool, question.id, {})) ?? question);

  /** The question of the connection's workspace an interaction names; another workspace's is unknown alike. */
  async function questionOf(connection: store.SlackConnectionRow, id: string): Promise<store.QuestionRow> {
    const question = await store.findQuestion(pool, id, { workspaceId: connection.workspace_id });
    if (!question) throw new HeraldError('not_found', 'No such question.', { title: 'Not found' });
    return question;
  }

  async function blockAction(connection: store.SlackConnectionRow, client: WebClient, payload: InteractionPayload): Promise<HandleSlackInteractionResponse> {
    const action = payload.actions?.[0];
    if (!action?.block_id?.startsWith(BLOCK_PREFIX)) throw badRequest('The action is not on a Herald question.');
    const question = await questionOf(connection, action.block_id.slice(BLOCK_PREFIX.length));
    const answer = clickedAnswer(question, action);
    if (question.status !== 'pending' || question.expired) {
      await ephemeral(client, payload, alreadyEnded(question));
      return { bodyJson: '' };
    }
    if (answer === undefined) {
      await client.views.open({ trigger_id: payload.trigger_id ?? '', view: inputModal(question) });
      return { bodyJson: '' };
    }
    try {
      await answerAs(payload, question, answer);
    } catch (err) {
      if (!(err instanceof HeraldError)) throw err;
      if (err.code === 'conflict') {
        await ephemeral(client, payload, await endedMeanwhile(question));
        return { bodyJson: '' };
      }
      if (err.code === 'forbidden') await ephemeral(client, payload, 'You are not among the approvers of this question; your answer was not taken.');
      throw err;
    }
    return { bodyJson: '' };
  }

  async function viewSubmission(connection: store.SlackConnectionRow, payload: InteractionPayload): Promise<HandleSlackInteractionResponse> {
    const view = payload.view;
    if (view?.callback_id !== INPUT_MODAL.callbackId) throw badRequest(`Unknown view "${String(view?.callback_id).slice(0, 100)}".`);
    const question = await questionOf(connection, view.private_metadata ?? '');
    const answer = view.state?.values?.[INPUT_MODAL.blockId]?.[INPUT_MODAL.actionId]?.value ?? '';
    const refuse = (text: string): HandleSlackInteractionResponse => ({ bodyJson: JSON.stringify({ response_action: 'errors', errors: { [INPUT_MODAL.blockId]: text } }) });
    if (question.type !== 'input') throw badRequest('This question does not take a typed answer.');
    if (question.status !== 'pending' || question.expired) return refuse(alreadyEnded(question));
    try {
      await answerAs(payload, question, answer);
    } catch (err) {
      if (!(err instanceof HeraldError)) throw err;
      if (err.code === 'conflict') return refuse(await endedMeanwhile(question));
      if (err.code === 'forbidden') return refuse('You are not among the approvers of this question.');
      if (err.code === 'invalid_request') return refuse(err.message);
      throw err;
    }
    return { bodyJson: '' };
  }

  /** The connection's signing secret; one sealed with a key no longer configured verifies nothing (logged: the workspace must connect again). */
  function signingSecretOf(connection: store.SlackConnectionRow): string | undefined {
    try {
      return deps.secrets.open(connection.signing_secret);
    } catch (err) {
      logger.error({ err, workspaceId: connection.workspace_id }, 'cannot open the slack signing secret; the workspace must connect slack again');
      return undefined;
    }
  }

  return async function handleSlackInteraction({ rawBody, timestamp, signature }: HandleSlackInteractionRequest): Promise<HandleSlackInteractionResponse> {
    const body = Buffer.from(rawBody);
    // The window first (cheap), then the team's connection (read from the unverified payload), then its signature.
    if (!inWindow(timestamp)) throw unauthenticated();
    const payload = parsePayload(body);
    const teamId = payload.team?.id ?? payload.user?.team_id ?? '';
    const connection = teamId === '' ? undefined : await store.findSlackConnectionByTeam(pool, teamId);
    if (!connection || !verifySlackSignature(signingSecretOf(connection), timestamp, body, signature)) throw unauthenticated();
    const client = webClient(deps, deps.secrets.open(connection.bot_token));
    if (payload.type === 'block_actions') return blockAction(connection, client, payload);
    if (payload.type === 'view_submission') return viewSubmission(connection, payload);
    throw badRequest(`Herald does not handle Slack "${String(payload.type).slice(0, 100)}" requests.`);
  };
}

/** The SlackService RPCs (served by the decision service beside DecisionService). */
export function slackHandlers(deps: InteractionDeps) {
  const connections = slackConnections(deps);
  const handleSlackInteraction = slackInteractions(deps);
  return implementService(
    SlackServiceService,
    {
      async connectSlack({ workspaceId, botToken, signingSecret, defaultChannel }) {
        return { connection: await connections.connect(workspaceId, botToken, signingSecret, defaultChannel) };
      },
      async getSlackConnection({ workspaceId }) {
        return { connection: await connections.get(workspaceId) };
      },
      async disconnectSlack({ workspaceId }) {
        await connections.disconnect(workspaceId);
        return {};
      },
      handleSlackInteraction,
    },
    deps.logger,
  );
}
