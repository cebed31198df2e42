import { createHash } from 'node:crypto';

import { ConflictError, type Decision, type DecisionRequest, type Herald, type Scalar, type Verdict } from '@herald/sdk';

/**
 * The approval gate every adapter shares: a tool call is evaluated by POST /authorize with the
 * tool's name and exact arguments; `allow` runs it, `deny` refuses it, `requires_human` opens a
 * decision bound to those arguments and only a person's explicit yes to that very decision runs
 * the tool. Silence, a cancel, an expiry, other arguments and any error refuse: it fails closed.
 */

/** One call an agent wants to make. */
export interface ToolCall {
  toolName: string;
  /** The arguments exactly as the tool will receive them. */
  input: unknown;
  /**
   * The framework's id of this call. With it the decision is opened under an idempotency key, so
   * the same call asked again (a resumed run, a restarted process) finds the same decision.
   */
  callId?: string;
}

export interface GateOptions {
  herald: Herald;
  /** How long a blocking gate waits for the person, across as many 55 s holds as it takes. Default 10 minutes. */
  waitTimeoutMs?: number;
  /** The end-user the calls are for (a bound key may name only its own). */
  externalId?: string;
  /** Who the decision goes to: `owner` (default without externalId), `user` (default with one) or `team`. */
  audience?: DecisionRequest['audience'];
  /**
   * The people who may approve this agent's tool calls (up to 20: `{kind: "slack" | "email" |
   * "subscriber" | "key" | "member", id}`), sent with each decision: each is delivered it on their
   * channel, and an answer from anyone else is refused.
   */
  approvers?: DecisionRequest['approvers'];
  /** The agent acting: `principal.actor` in policies, and the name the person sees. */
  actor?: string;
  /** e.g. `production`: `context.environment` in policies. */
  environment?: string;
  /** What the call acts on (`resource.target`), e.g. from its arguments. */
  toolTarget?: (call: ToolCall) => string | undefined;
  /** The question the person sees; default "Allow <actor> to call <tool>?". Keep it a function of the call only: a replay must send the same question. */
  question?: (call: ToolCall) => string;
  /** How long the decision stays answerable, 60–86,400 s (Herald's default 3,600). */
  expiresInSeconds?: number;
  /** Mixed into the decisions' idempotency keys, e.g. a conversation or thread id, when call ids may repeat across runs. */
  scope?: string;
}

/** The gate's verdict on one call. */
export type Clearance =
  | { cleared: true; authorization: Verdict; decision: Decision | null }
  | { cleared: false; authorization: Verdict; decision: Decision | null; reason: string };

/** What the first look at a call found: run it, refuse it, or a person has to say yes to this decision. */
export type Screening =
  | { verdict: 'allow'; authorization: Verdict }
  | { verdict: 'deny'; authorization: Verdict; reason: string }
  | { verdict: 'requires_human'; authorization: Verdict; decision: Decision };

/**
 * What a framework that pauses its run (LangGraph's interrupt, Mastra's suspend) carries while a
 * person decides: enough to wait for the decision, or to show it.
 */
export interface PendingDecision {
  herald: 'decision';
  decisionId: string;
  toolName: string;
  toolCallId: string;
  decisionPageUrl: string;
  question: string;
}

/** Whether a pause's value is the gate's. */
export function isPendingDecision(value: unknown): value is PendingDecision {
  return typeof value === 'object' && value !== null && (value as { herald?: unknown }).herald === 'decision' && typeof (value as { decisionId?: unknown }).decisionId === 'string';
}

/** What to do with a call in a run that can pause: run it (`decision`: the person's yes, null when the policy allowed it), refuse it, or pause until the person decides. */
export type Step = { action: 'run'; decision: Decision | null } | { action: 'refuse'; error: ToolCallRefusedError } | { action: 'pause'; pending: PendingDecision };

/** A tool call the gate did not let through; the message is what the agent is told. */
export class ToolCallRefusedError extends Error {
  override name = 'ToolCallRefusedError';
  readonly toolName: string;
  readonly reason: string;
  readonly authorization: Verdict;
  readonly decision: Decision | null;

  constructor(toolName: string, refusal: Extract<Clearance, { cleared: false }>) {
    super(`Herald refused ${toolName}: ${refusal.reason}`);
    this.toolName = toolName;
    this.reason = refusal.reason;
    this.authorization = refusal.authorization;
    this.decision = refusal.decision;
  }
}

const DEFAULT_WAIT_MS = 600_000;

/**
 * Tool arguments as Herald's `parameters`, which hold scalars only: a scalar stays as it is, a
 * nested object or list becomes its JSON text (so it is still bound exactly), undefined is left out.
 */
export function parametersOf(input: unknown): Record<string, Scalar> {
  if (input === undefined || input === null) return {};
  if (typeof input !== 'object' || Array.isArray(input)) return { input: scalarOf(input) };
  const parameters: Record<string, Scalar> = {};
  for (const [name, value] of Object.entries(input)) if (value !== undefined) parameters[name] = scalarOf(value);
  return parameters;
}

function scalarOf(value: unknown): Scalar {
  if (value === null || typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value))) return value;
  return JSON.stringify(value) ?? String(value);
}

function sameParameters(approved: Record<string, Scalar> | null, called: Record<string, Scalar>): boolean {
  const granted = approved ?? {};
  const names = Object.keys(called);
  return names.length === Object.keys(granted).length && names.every((name) => Object.hasOwn(granted, name) && granted[name] === called[name]);
}

/**
 * Who answered a decision, as the agent is told: the display name, the kind and, where it is not
 * the kind's own, the channel: "ops@example.com (email)", "U024BE7LH (slack)", "alice (subscriber
 * via web_push)", "key_… (key via api)"; "the holder of the answer link" (a question without
 * approvers answered through its link), or "the person" for an answer recorded before Herald said who.
 */
export function answererOf(decision: Decision): string {
  const by = decision.answeredBy;
  if (by === null) return 'the person';
  if (by.kind === 'link') return by.displayName;
  return `${by.displayName} (${by.kind}${by.channel === by.kind ? '' : ` via ${by.channel}`})`;
}

/** What the agent is told of an approval: who gave it. */
export const approvalOf = (decision: Decision): string => `approved by ${answererOf(decision)}`;

/** What a tool behind the gate gives the agent when a person approved the call: who approved it, and the tool's own result. */
export interface Approved<Result> {
  approval: string;
  result: Result;
}

/** A cleared call's result as the agent is given it: after a person's yes `{approval: "approved by …", result}`; after the policy's allow (no decision) the result alone. */
export function approvedResult<Result>(decision: Decision | null, result: Result): Result | Approved<Result> {
  return decision === null ? result : { approval: approvalOf(decision), result };
}

/** Why a decision that is not an explicit yes to this call refuses it. */
function refusalOf(decision: Decision): string {
  switch (decision.status) {
    case 'answered':
      return `${answererOf(decision)} answered "${decision.answer ?? ''}"`;
    case 'cancelled':
      return 'the decision was cancelled';
    case 'expired':
      return 'the decision expired unanswered';
    default:
      return 'no answer yet; silence is never approval';
  }
}

export class HeraldGate {
  readonly herald: Herald;
  readonly #options: GateOptions;

  constructor(options: GateOptions) {
    this.herald = options.herald;
    this.#options = options;
  }

  /** POST /authorize for the call: the policy's verdict. */
  authorize(call: ToolCall, signal?: AbortSignal): Promise<Verdict> {
    const { actor, environment, externalId } = this.#options;
    const toolTarget = this.#options.toolTarget?.(call);
    return this.herald.authorize(
      {
        toolName: call.toolName,
        parameters: parametersOf(call.input),
        ...(toolTarget === undefined ? {} : { toolTarget }),
        ...(actor === undefined ? {} : { actor }),
        ...(environment === undefined ? {} : { environment }),
        ...(externalId === undefined ? {} : { externalId }),
      },
      { signal },
    );
  }

  /** Opens the decision about this call without waiting; with a callId, the one opened before for it. */
  openDecision(call: ToolCall, signal?: AbortSignal): Promise<Decision> {
    const { actor, externalId, audience, approvers, expiresInSeconds } = this.#options;
    const toolTarget = this.#options.toolTarget?.(call);
    const request: DecisionRequest = {
      question: this.#options.question?.(call) ?? `Allow ${actor ?? 'the agent'} to call ${call.toolName}?`,
      type: 'confirm',
      toolName: call.toolName,
      parameters: parametersOf(call.input),
      wait: false,
      ...(toolTarget === undefined ? {} : { toolTarget }),
      ...(actor === undefined ? {} : { agentName: actor }),
      ...(externalId === undefined ? {} : { externalId }),
      ...(audience === undefined ? {} : { audience }),
      ...(approvers === undefined ? {} : { approvers }),
      ...(expiresInSeconds === undefined ? {} : { expiresInSeconds }),
    };
    return this.herald.createDecision(request, { signal, ...(call.callId === undefined ? {} : { idempotencyKey: this.idempotencyKeyOf(call) }) });
  }

  /** The decision's idempotency key for a call: the same tool, call id and scope always give the same key. */
  idempotencyKeyOf(call: ToolCall): string {
    const digest = createHash('sha256').update(JSON.stringify([this.#options.scope ?? '', call.toolName, call.callId ?? ''])).digest('base64url');
    return `herald-gate-${digest}`;
  }

  /** Authorize, and on `requires_human` open (or find) the decision, without waiting for it. */
  async screen(call: ToolCall, signal?: AbortSignal): Promise<Screening> {
    const authorization = await this.authorize(call, signal);
    if (authorization.verdict === 'allow') return { verdict: 'allow', authorization };
    if (authorization.verdict === 'deny') return { verdict: 'deny', authorization, reason: `denied by policy: ${authorization.reason}` };
    return { verdict: 'requires_human', authorization, decision: await this.openDecision(call, signal) };
  }

  /** Waits for a pending decision across 55 s holds until it resolves or `waitTimeoutMs` passes (then it is still pending). */
  settle(decision: Decision, options: { waitTimeoutMs?: number; signal?: AbortSignal } = {}): Promise<Decision> {
    return this.herald.waitForDecision(decision, { totalTimeoutMs: options.waitTimeoutMs ?? this.#options.waitTimeoutMs ?? DEFAULT_WAIT_MS, signal: options.signal });
  }

  /** Whether a decision lets this very call run: an explicit yes about the same tool with the same arguments. */
  judge(call: ToolCall, authorization: Verdict, decision: Decision): Clearance {
    if (!decision.approved || decision.status !== 'answered') return { cleared: false, authorization, decision, reason: refusalOf(decision) };
    if (decision.toolName !== call.toolName || !sameParameters(decision.parameters, parametersOf(call.input))) {
      return { cleared: false, authorization, decision, reason: 'the approval was given for other arguments' };
    }
    return { cleared: true, authorization, decision };
  }

  /**
   * The whole gate, blocking: screen, then wait for the person. A decision still open when the
   * wait ends is cancelled (the person is not left answering a call that was refused), unless it
   * was answered meanwhile, in which case that answer counts.
   */
  async clear(call: ToolCall, signal?: AbortSignal): Promise<Clearance> {
    const screening = await this.screen(call, signal);
    if (screening.verdict === 'allow') return { cleared: true, authorization: screening.authorization, decision: null };
    if (screening.verdict === 'deny') return { cleared: false, authorization: screening.authorization, decision: null, reason: screening.reason };
    let decision = await this.settle(screening.decision, { signal });
    if (decision.status === 'pending') decision = await this.#withdraw(decision, signal);
    return this.judge(call, screening.authorization, decision);
  }

  /** Runs the tool with the call's arguments once the gate clears it; otherwise throws ToolCallRefusedError. */
  async run<Result>(call: ToolCall, execute: () => Result | Promise<Result>, signal?: AbortSignal): Promise<Result> {
    await this.#cleared(call, signal);
    return execute();
  }

  /** As `run`, its result as the agent is given it (`approvedResult`): after a person's yes, with who approved the call. */
  async runApproved<Result>(call: ToolCall, execute: () => Result | Promise<Result>, signal?: AbortSignal): Promise<Result | Approved<Result>> {
    const decision = await this.#cleared(call, signal);
    return approvedResult(decision, await execute());
  }

  /** The person's yes that clears the call (null: the policy allowed it); throws ToolCallRefusedError otherwise. */
  async #cleared(call: ToolCall, signal: AbortSignal | undefined): Promise<Decision | null> {
    const clearance = await this.clear(call, signal);
    if (!clearance.cleared) throw new ToolCallRefusedError(call.toolName, clearance);
    return clearance.decision;
  }

  /**
   * The gate for a run that pauses instead of waiting (the call must have its callId). First
   * pass: `pause` while the decision is open. `resumed`: the run came back, so an open decision
   * is silence and refuses; whatever resumed it, only Herald's decision counts.
   */
  step(call: ToolCall & { callId: string }, options: { resumed: true; signal?: AbortSignal }): Promise<Exclude<Step, { action: 'pause' }>>;
  step(call: ToolCall & { callId: string }, options: { resumed: boolean; signal?: AbortSignal }): Promise<Step>;
  async step(call: ToolCall & { callId: string }, options: { resumed: boolean; signal?: AbortSignal }): Promise<Step> {
    const screening = await this.screen(call, options.signal);
    if (screening.verdict === 'allow') return { action: 'run', decision: null };
    if (screening.verdict === 'deny') {
      return { action: 'refuse', error: new ToolCallRefusedError(call.toolName, { cleared: false, authorization: screening.authorization, decision: null, reason: screening.reason }) };
    }
    const { decision } = screening;
    if (decision.status === 'pending' && !options.resumed) {
      return {
        action: 'pause',
        pending: { herald: 'decision', decisionId: decision.decisionId, toolName: call.toolName, toolCallId: call.callId, decisionPageUrl: decision.decisionPageUrl, question: decision.question },
      };
    }
    const clearance = this.judge(call, screening.authorization, decision);
    return clearance.cleared ? { action: 'run', decision } : { action: 'refuse', error: new ToolCallRefusedError(call.toolName, clearance) };
  }

  /**
   * Waits (across 55 s holds, up to `waitTimeoutMs`) for a paused call's decision; the decision
   * once answered, cancelled or expired (resume the run then), or null while it is still open.
   */
  async whenDecided(pending: PendingDecision, options: { waitTimeoutMs?: number; signal?: AbortSignal } = {}): Promise<Decision | null> {
    const decision = await this.settle(await this.herald.getDecision(pending.decisionId, {}, { signal: options.signal }), options);
    return decision.status === 'pending' ? null : decision;
  }

  async #withdraw(decision: Decision, signal: AbortSignal | undefined): Promise<Decision> {
    try {
      return await this.herald.cancelDecision(decision.decisionId, { signal });
    } catch (err) {
      // Answered (or expired) between the last read and the cancel: what it became decides.
      if (err instanceof ConflictError) return this.herald.getDecision(decision.decisionId, {}, { signal });
      throw err;
    }
  }
}
