import { CONTENT_LIMITS as LIMITS, HTTP_URL_PATTERN, VARIABLE_NAME_PATTERN, fillPlaceholders } from '@herald/domain';
import { invalidFields, type FieldProblem } from '@herald/errors';
import type { Template } from '@herald/proto/herald/campaign/v1/templates';
import type { StepInput } from '@herald/proto/herald/flow/v1/flow';

/**
 * Flow steps: what each type's config holds, checked strictly (every problem is named by its
 * path, `steps[i].config...`), and the form a flow version stores.
 */

export const STEP_TYPES = ['send_notification', 'delay', 'exit'] as const;
export type StepType = (typeof STEP_TYPES)[number];

export const DELAY_UNITS = { seconds: 1, minutes: 60, hours: 3_600, days: 86_400 } as const;
export type DelayUnit = keyof typeof DELAY_UNITS;
/** The longest single delay: a year. Longer waits are a chain of delays. */
export const MAX_DELAY_SECONDS = 365 * 86_400;
export const MAX_STEPS = 50;

export interface NotificationConfig {
  title: string;
  body: string;
  iconUrl?: string;
  imageUrl?: string;
  actionUrl?: string;
}

/** A send's content: given, or copied from a template (its placeholders filled from `variables`) when the flow is saved. */
export interface SendConfig {
  notification: NotificationConfig;
  templateId?: string;
  variables?: Record<string, string>;
}

export type Step =
  | { id: string; stepType: 'send_notification'; config: SendConfig }
  | { id: string; stepType: 'delay'; config: { delay: { value: number; unit: DelayUnit } } }
  | { id: string; stepType: 'exit'; config: Record<string, never> };

// The content's bounds are the API's (the gateway's route schemas take them from @herald/domain too).
const VARIABLE_NAME = new RegExp(VARIABLE_NAME_PATTERN);
const HTTP_URL = new RegExp(HTTP_URL_PATTERN);

type Json = unknown;
const isObject = (value: Json): value is Record<string, Json> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** Collects the problems of one step's config; `at` is its path (steps[i].config). */
class Checker {
  readonly problems: FieldProblem[] = [];
  problem(field: string, problem: string): void {
    this.problems.push({ field, in: 'body', problem });
  }
  /** An object with exactly the keys allowed (those in `required` must be there). */
  object(value: Json, at: string, required: readonly string[], optional: readonly string[] = []): value is Record<string, Json> {
    if (!isObject(value)) {
      this.problem(at, 'must be an object');
      return false;
    }
    for (const key of required) if (!(key in value)) this.problem(`${at}.${key}`, 'is required');
    for (const key of Object.keys(value)) if (![...required, ...optional].includes(key)) this.problem(`${at}.${key}`, 'is not allowed');
    return true;
  }
  text(value: Json, at: string, maxLength: number, pattern?: RegExp): void {
    if (value === undefined) return;
    if (typeof value !== 'string') this.problem(at, 'must be a string');
    else if (value.length === 0) this.problem(at, 'must not be empty');
    else if (value.length > maxLength) this.problem(at, `must be at most ${maxLength} characters`);
    else if (pattern && !pattern.test(value)) this.problem(at, 'must be an http(s) URL');
  }
}

function checkNotification(checker: Checker, config: Record<string, Json>, at: string): void {
  const notification = config.notification;
  if (notification === undefined) return;
  const path = `${at}.notification`;
  if (!checker.object(notification, path, ['title', 'body'], ['iconUrl', 'imageUrl', 'actionUrl'])) return;
  checker.text(notification.title, `${path}.title`, LIMITS.title);
  checker.text(notification.body, `${path}.body`, LIMITS.body);
  for (const key of ['iconUrl', 'imageUrl', 'actionUrl'] as const) checker.text(notification[key], `${path}.${key}`, LIMITS.url, HTTP_URL);
}

/** `{templateId, variables?}`: the notification comes from the template (a `notification` given along is replaced). */
function checkTemplate(checker: Checker, config: Record<string, Json>, at: string): void {
  checker.text(config.templateId, `${at}.templateId`, LIMITS.templateId);
  const variables = config.variables;
  if (variables === undefined) return;
  if (!isObject(variables)) {
    checker.problem(`${at}.variables`, 'must be an object');
    return;
  }
  const entries = Object.entries(variables);
  if (entries.length > LIMITS.variables) checker.problem(`${at}.variables`, `must have at most ${LIMITS.variables} variables`);
  for (const [name, value] of entries) {
    if (!VARIABLE_NAME.test(name)) checker.problem(`${at}.variables.${name}`, 'is not a placeholder name (a letter or _, then letters, digits, _ or .)');
    else if (typeof value !== 'string') checker.problem(`${at}.variables.${name}`, 'must be a string');
    else if (value.length > LIMITS.variable) checker.problem(`${at}.variables.${name}`, `must be at most ${LIMITS.variable} characters`);
  }
}

function checkSend(checker: Checker, config: Json, at: string): void {
  if (isObject(config) && config.templateId !== undefined) {
    if (checker.object(config, at, ['templateId'], ['variables', 'notification'])) checkTemplate(checker, config, at);
  } else if (checker.object(config, at, ['notification'])) {
    checkNotification(checker, config, at);
  }
}

function checkDelay(checker: Checker, config: Record<string, Json>, at: string): void {
  const delay = config.delay;
  if (delay === undefined) return;
  const path = `${at}.delay`;
  if (!checker.object(delay, path, ['value', 'unit'])) return;
  const unit = delay.unit;
  const unitKnown = typeof unit === 'string' && Object.hasOwn(DELAY_UNITS, unit);
  if (unit !== undefined && !unitKnown) checker.problem(`${path}.unit`, `must be one of ${Object.keys(DELAY_UNITS).join(', ')}`);
  const value = delay.value;
  if (value === undefined) return;
  if (typeof value !== 'number' || !Number.isFinite(value)) checker.problem(`${path}.value`, 'must be a number');
  else if (value <= 0) checker.problem(`${path}.value`, 'must be greater than 0');
  else if (unitKnown && value * DELAY_UNITS[unit as DelayUnit] > MAX_DELAY_SECONDS) checker.problem(`${path}.value`, 'must be at most 365 days');
}

/**
 * The steps as written, checked: a 400 naming every bad field, or the steps in order with fresh
 * ids. `configJson` is the config object as the caller sent it.
 */
export function parseSteps(inputs: readonly StepInput[], newId: () => string): Step[] {
  const checker = new Checker();
  if (inputs.length > MAX_STEPS) checker.problem('steps', `must have at most ${MAX_STEPS} steps`);
  const steps: Step[] = [];
  inputs.forEach((input, index) => {
    const at = `steps[${index}].config`;
    const before = checker.problems.length;
    let config: Json;
    try {
      config = JSON.parse(input.configJson || 'null');
    } catch {
      config = undefined;
    }
    const stepType = input.stepType;
    if (!(STEP_TYPES as readonly string[]).includes(stepType)) {
      checker.problem(`steps[${index}].stepType`, `must be one of ${STEP_TYPES.join(', ')}`);
      return;
    }
    if (stepType === 'send_notification') {
      checkSend(checker, config, at);
    } else if (stepType === 'delay') {
      if (checker.object(config, at, ['delay'])) checkDelay(checker, config, at);
    } else {
      checker.object(config, at, []);
    }
    if (checker.problems.length === before) steps.push({ id: newId(), stepType, config } as Step);
  });
  if (checker.problems.length > 0) throw invalidFields('body', checker.problems);
  return steps;
}

/** How long a delay step waits, in milliseconds. */
export function delayMs(step: Extract<Step, { stepType: 'delay' }>): number {
  return Math.round(step.config.delay.value * DELAY_UNITS[step.config.delay.unit] * 1_000);
}

/**
 * Fills the sends that name a template: each copies the template's content with its placeholders
 * filled from the step's `variables` (later edits of the template do not change the flow). A
 * template that is not the workspace's, or a placeholder without a value or default, is a 400
 * naming the step.
 */
export async function fillTemplates(steps: Step[], templateOf: (templateId: string) => Promise<Template | undefined>): Promise<Step[]> {
  const problems: FieldProblem[] = [];
  const filled = await Promise.all(
    steps.map(async (step, index): Promise<Step> => {
      if (step.stepType !== 'send_notification' || step.config.templateId === undefined) return step;
      const at = `steps[${index}].config`;
      const variables = step.config.variables ?? {};
      const template = await templateOf(step.config.templateId);
      if (!template) {
        problems.push({ field: `${at}.templateId`, in: 'body', problem: 'names no template of this workspace' });
        return step;
      }
      const fill = (text: string, field: string) => fillPlaceholders(text, variables, field, problems, { variables: `${at}.variables`, text: `${at}.templateId` });
      const notification: NotificationConfig = { title: fill(template.title, 'title'), body: fill(template.body, 'body') };
      if (template.iconUrl) notification.iconUrl = template.iconUrl;
      if (template.imageUrl) notification.imageUrl = template.imageUrl;
      if (template.actionUrl) notification.actionUrl = fill(template.actionUrl, 'actionUrl');
      return { ...step, config: { templateId: step.config.templateId, variables, notification } };
    }),
  );
  if (problems.length > 0) throw invalidFields('body', problems);
  return filled;
}
