import * as cedar from '@cedar-policy/cedar-wasm/nodejs';
import type { AuthorizationAnswer, DetailedError, EntityJson, CedarValueJson } from '@cedar-policy/cedar-wasm/nodejs';

/**
 * Herald's Cedar entity model, the checks a policy passes before it is stored, and the
 * fail-closed evaluation of one tool call. See docs/policy.md for the contract.
 *
 * Every attribute is declared required so policies need no `has` guards; at evaluation time a
 * field the caller did not send is simply absent, and reading it is an evaluation error: the
 * policy that read it does not apply (a permit) or denies the call (a forbid). Fail-closed.
 */
export const HERALD_SCHEMA = `namespace Herald {
  // One tool-call parameter: exactly one field is present at evaluation time (none for null).
  type Param = { string: String, long: Long, bool: Bool };
  // The caller: the API key (its id) acting for an end-user, on behalf of a named agent.
  entity Agent = { key: String, origin: String, externalId: String, actor: String };
  // The tool being called (entity id = toolName); parameters are its tags.
  entity Tool = { name: String, target: String } tags Param;
  action "call" appliesTo { principal: [Agent], resource: [Tool], context: { environment: String } };
}`;

/** The annotation that turns a permit into "allowed after a person approves". */
export const HUMAN_REVIEW_ANNOTATION = 'requires_human';

export interface PolicyProblem {
  message: string;
  policyId?: string;
  line?: number;
  column?: number;
  help?: string;
}

export interface CompiledPolicy {
  /** Policy id (from `@id("…")`, else Cedar's positional policy0, policy1…) -> its text. */
  policies: Record<string, string>;
  forbids: Set<string>;
  humanReview: Set<string>;
}

export type CompileResult = { ok: true; compiled: CompiledPolicy } | { ok: false; problems: PolicyProblem[] };

const SCHEMA_NAME = 'herald';
{
  const schemaCheck = cedar.preparseSchema(SCHEMA_NAME, HERALD_SCHEMA);
  if (schemaCheck.type !== 'success') throw new Error(`Herald's Cedar schema does not parse: ${JSON.stringify(schemaCheck.errors)}`);
}

/** 1-based line and column of a byte offset of `text` (Cedar reports byte offsets). */
function position(text: string, byteOffset: number): { line: number; column: number } {
  const before = Buffer.from(text, 'utf8').subarray(0, byteOffset).toString('utf8');
  const lines = before.split('\n');
  return { line: lines.length, column: (lines.at(-1)?.length ?? 0) + 1 };
}

function problem(text: string, error: DetailedError, policyId?: string): PolicyProblem {
  const location = error.sourceLocations?.[0];
  const label = location?.label ? ` (${location.label})` : '';
  return {
    // Cedar names the policy by position ("for policy `policy0`, ..."); policyId carries its real id.
    message: `${error.message.replace(/^for policy `[^`]*`, /, '')}${label}`,
    ...(policyId !== undefined ? { policyId } : {}),
    ...(location ? position(text, location.start) : {}),
    ...(error.help ? { help: error.help } : {}),
  };
}

/** Parses and validates a whole policy text against HERALD_SCHEMA; nothing partial. */
export function compile(text: string): CompileResult {
  const parts = cedar.policySetTextToParts(text);
  if (parts.type !== 'success') return { ok: false, problems: parts.errors.map((error) => problem(text, error)) };
  if (parts.policy_templates.length > 0) return { ok: false, problems: [{ message: 'policy templates (?principal, ?resource slots) are not supported' }] };

  const problems: PolicyProblem[] = [];
  const policies: Record<string, string> = {};
  const forbids = new Set<string>();
  const humanReview = new Set<string>();
  const idByPosition = new Map<string, string>();
  parts.policies.forEach((policyText, index) => {
    const json = cedar.policyToJson(policyText);
    if (json.type !== 'success') {
      problems.push(...json.errors.map((error) => problem(text, error, `policy${index}`)));
      return;
    }
    const annotations = json.json.annotations ?? {};
    const id = annotations.id ?? `policy${index}`;
    idByPosition.set(`policy${index}`, id);
    if (id in policies) {
      problems.push({ message: `two policies have the id "${id}"`, policyId: id });
      return;
    }
    policies[id] = policyText;
    if (json.json.effect === 'forbid') forbids.add(id);
    if (HUMAN_REVIEW_ANNOTATION in annotations) {
      if (json.json.effect === 'forbid') problems.push({ message: `@${HUMAN_REVIEW_ANNOTATION} applies to permit policies only`, policyId: id });
      else humanReview.add(id);
    }
  });
  if (problems.length > 0) return { ok: false, problems };

  const validation = cedar.validate({ schema: HERALD_SCHEMA, policies: { staticPolicies: text }, validationSettings: { mode: 'strict' } });
  if (validation.type !== 'success') return { ok: false, problems: validation.errors.map((error) => problem(text, error)) };
  if (validation.validationErrors.length > 0) {
    return {
      ok: false,
      problems: validation.validationErrors.map((error) => problem(text, error.error, idByPosition.get(error.policyId) ?? error.policyId)),
    };
  }
  return { ok: true, compiled: { policies, forbids, humanReview } };
}

/** Stores the compiled policy set in cedar-wasm's preparsed cache under `setId` (replacing any). */
export function preparse(setId: string, compiled: CompiledPolicy): void {
  const answer = cedar.preparsePolicySet(setId, { staticPolicies: compiled.policies });
  if (answer.type !== 'success') throw new Error(`preparsing a validated policy failed: ${answer.errors.map((error) => error.message).join('; ')}`);
}

/** Drops a preparsed set's policies (cedar-wasm has no removal; an empty set frees them). */
export function forget(setId: string): void {
  cedar.preparsePolicySet(setId, { staticPolicies: {} });
}

export type ParameterValue = string | number | boolean | null;

export interface ToolCall {
  keyId: string;
  keyOrigin: string;
  externalId?: string;
  actor?: string;
  toolName: string;
  toolTarget?: string;
  environment?: string;
  parameters: Record<string, ParameterValue>;
}

export type Verdict = 'allow' | 'deny' | 'requires_human';

export interface Decision {
  verdict: Verdict;
  policyId: string | null;
  reason: string;
}

function param(value: ParameterValue): CedarValueJson {
  if (value === null) return {};
  if (typeof value === 'string') return { string: value };
  if (typeof value === 'boolean') return { bool: value };
  // Cedar has 64-bit integers only; any other number is compared as its JSON text.
  return Number.isSafeInteger(value) ? { long: value } : { string: JSON.stringify(value) };
}

const present = <T>(name: string, value: T | undefined): Record<string, T> => (value === undefined ? {} : { [name]: value });

/** The Cedar request for a tool call: entities, context (absent fields stay absent). */
export function cedarRequest(call: ToolCall) {
  const principal = { type: 'Herald::Agent', id: call.keyId };
  const resource = { type: 'Herald::Tool', id: call.toolName };
  const entities: EntityJson[] = [
    {
      uid: principal,
      attrs: { key: call.keyId, origin: call.keyOrigin, ...present('externalId', call.externalId), ...present('actor', call.actor) },
      parents: [],
    },
    {
      uid: resource,
      attrs: { name: call.toolName, ...present('target', call.toolTarget) },
      parents: [],
      tags: Object.fromEntries(Object.entries(call.parameters).map(([name, value]) => [name, param(value)])),
    },
  ];
  return { principal, action: { type: 'Herald::Action', id: 'call' }, resource, context: present('environment', call.environment), entities };
}

/**
 * Precedence: an evaluation error in a forbid, or a matching forbid -> deny; else a matching
 * permit without @requires_human -> allow; else a matching @requires_human permit ->
 * requires_human; else deny (naming the permit that failed to evaluate, if one did).
 */
export function decide(compiled: CompiledPolicy, answer: AuthorizationAnswer): Decision {
  if (answer.type !== 'success') {
    return { verdict: 'deny', policyId: null, reason: `evaluation error: ${answer.errors.map((error) => error.message).join('; ')}` };
  }
  const { decision } = answer.response;
  // Cedar reports policies as a set; take them in the order they appear in the text.
  const order = Object.keys(compiled.policies);
  const rank = (id: string): number => order.indexOf(id);
  const diagnostics = {
    reason: [...answer.response.diagnostics.reason].sort((a, b) => rank(a) - rank(b)),
    errors: [...answer.response.diagnostics.errors].sort((a, b) => rank(a.policyId) - rank(b.policyId)),
  };
  const forbidError = diagnostics.errors.find((error) => compiled.forbids.has(error.policyId));
  if (forbidError) {
    return {
      verdict: 'deny',
      policyId: forbidError.policyId,
      reason: `evaluation error in forbid policy ${forbidError.policyId}: ${forbidError.error.message}`,
    };
  }
  if (decision === 'deny' && diagnostics.reason.length > 0) {
    const id = diagnostics.reason[0] as string;
    return { verdict: 'deny', policyId: id, reason: `forbidden by policy ${id}` };
  }
  if (decision === 'allow') {
    const plain = diagnostics.reason.find((id) => !compiled.humanReview.has(id));
    if (plain !== undefined) return { verdict: 'allow', policyId: plain, reason: `permitted by policy ${plain}` };
    const review = diagnostics.reason[0] ?? null;
    return { verdict: 'requires_human', policyId: review, reason: `policy ${review} permits this call only after a person approves it` };
  }
  const permitError = diagnostics.errors[0];
  if (permitError) {
    return {
      verdict: 'deny',
      policyId: permitError.policyId,
      reason: `evaluation error in policy ${permitError.policyId}: ${permitError.error.message}; no policy permits this call`,
    };
  }
  return { verdict: 'deny', policyId: null, reason: 'no policy permits this call' };
}

/** Evaluates against the set preparsed under `setId` (which must hold `compiled`). */
export function evaluate(setId: string, compiled: CompiledPolicy, call: ToolCall): Decision {
  return failClosed(compiled, () => cedar.statefulIsAuthorized({ ...cedarRequest(call), preparsedPolicySetId: setId }));
}

/** Evaluates against a compiled policy that is not preparsed (a draft, evaluated once). */
export function evaluateOnce(compiled: CompiledPolicy, call: ToolCall): Decision {
  return failClosed(compiled, () => cedar.isAuthorized({ ...cedarRequest(call), policies: { staticPolicies: compiled.policies } }));
}

function failClosed(compiled: CompiledPolicy, authorize: () => AuthorizationAnswer): Decision {
  try {
    return decide(compiled, authorize());
  } catch (err) {
    return { verdict: 'deny', policyId: null, reason: `evaluation error: ${err instanceof Error ? err.message : String(err)}` };
  }
}
