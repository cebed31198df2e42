import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { QuestionChange } from '@herald/bus';
import { isRole, roleAllows } from '@herald/domain';
import { HeraldError } from '@herald/errors';
import type { Principal } from '@herald/proto/herald/account/v1/account';
import { QuestionKind } from '@herald/proto/herald/decision/v1/decision';
import { Type } from '@sinclair/typebox';

import { principalOf } from '../access.js';
import { askRecord, decisionRecord, questionOf, type QuestionRouteOptions } from '../questions.js';
import { withErrors } from '../schemas/common.js';

/**
 * GET /decisions/stream: a workspace's question changes as server-sent events, for an inbox that
 * updates live (the console's). Fed by the same Redis pub/sub that wakes callers waiting for an
 * answer (the decision service publishes each open, answer and cancellation on the workspace's
 * channel; see Waiters.watch): each change is read again with the caller's rights, so a bound key
 * hears only its end-user's decisions and a caller that may not read asks hears no ask.
 */

export interface DecisionStreamOptions extends QuestionRouteOptions {
  /** The most streams one workspace holds open on one gateway replica (DECISION_STREAMS_PER_WORKSPACE). */
  streamsPerWorkspace: number;
  /** How often a comment line keeps proxies and the browser from closing an idle stream (DECISION_STREAM_HEARTBEAT_MS). */
  heartbeatMs: number;
}

/** Whether the caller may read `scope` (its role for a member's session, its scopes for a key). */
function mayRead(principal: Principal, scope: 'ask'): boolean {
  if (principal.role) return isRole(principal.role) && roleAllows(principal.role, scope, 'GET');
  return principal.scopes.includes(scope) && !principal.plan?.partner;
}

const event = (name: string, data: unknown) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;

export const decisionStreamRoutes =
  ({ clients, waiters, publicOrigin, streamsPerWorkspace, heartbeatMs }: DecisionStreamOptions): FastifyPluginAsyncTypebox =>
  async (app) => {
    app.get(
      '/decisions/stream',
      {
        config: { access: { scope: 'decisions' as const } },
        schema: {
          tags: ['Decisions'],
          operationId: 'streamDecisions',
          summary: "The workspace's question changes, live (server-sent events)",
          description: [
            'A `text/event-stream` that stays open. Events: `ready` (the stream listens: what changes from now on is sent),',
            '`decision` and `ask` (a question was opened, answered or cancelled: data is its record as GET /decisions/{decisionId} or GET /ask/{correlationId} returns it),',
            '`resync` (changes may have been missed: read the lists again). A comment line every 15 s (`DECISION_STREAM_HEARTBEAT_MS`) keeps it open.',
            'A bound key hears only its end-user\'s decisions; asks are sent only to callers that may read them.',
            'At most `DECISION_STREAMS_PER_WORKSPACE` streams per workspace and gateway replica (20 by default): beyond, 429.',
          ].join(' '),
          response: withErrors({ 200: Type.String({ description: 'text/event-stream' }) }),
        },
      },
      async (request, reply) => {
        const principal = principalOf(request);
        const withAsks = mayRead(principal, 'ask');
        const raw = reply.raw;
        let ended = false;
        let sending = Promise.resolve();

        const send = async (change: QuestionChange) => {
          if (change.kind === 'ask' && !withAsks) return;
          const kind = change.kind === 'ask' ? QuestionKind.QUESTION_KIND_ASK : QuestionKind.QUESTION_KIND_DECISION;
          const externalIdScope = change.kind === 'ask' ? '' : principal.boundExternalId;
          let text: string;
          try {
            const question = questionOf(await clients.decision.getQuestion({ ref: { by: { $case: 'owned', value: { workspaceId: principal.workspaceId, kind, id: change.id, externalIdScope } } } }));
            text = change.kind === 'ask' ? event('ask', askRecord(question, publicOrigin)) : event('decision', decisionRecord(question, publicOrigin));
          } catch (err) {
            // Not this caller's (another end-user's decision): nothing to say. Anything else: read again.
            if (err instanceof HeraldError && err.code === 'not_found') return;
            request.log.warn({ err, questionId: change.id }, 'could not read a changed question for a stream');
            text = event('resync', {});
          }
          if (!ended) raw.write(text);
        };
        const stop = await waiters.watch(
          principal.workspaceId,
          {
            // One after the other, so a question's events arrive in the order they happened.
            changed: (change) => (sending = sending.then(() => send(change))),
            resumed: () => raw.write(event('resync', {})),
            closing: () => raw.end(),
          },
          streamsPerWorkspace,
        );
        if (!stop) {
          throw new HeraldError('rate_limited', `This workspace already has ${streamsPerWorkspace} live streams open here; close one first.`, {
            title: 'Too many streams',
            extra: { retryAfter: 30, limit: streamsPerWorkspace },
          });
        }
        const heartbeat = setInterval(() => raw.write(': heartbeat\n\n'), heartbeatMs);
        raw.once('close', () => {
          ended = true;
          clearInterval(heartbeat);
          stop();
        });
        reply.hijack();
        // What the hooks set before (the request id, rate-limit headers) goes out with the stream.
        for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) raw.setHeader(name, value);
        raw.writeHead(200, {
          'content-type': 'text/event-stream; charset=utf-8',
          'cache-control': 'no-store',
          'x-accel-buffering': 'no',
        });
        raw.write(`retry: 3000\n${event('ready', {})}`);
      },
    );
  };
