// k6: check, group, sleep, fail. A check is a sample of `checks` tagged with its name; a predicate
// that throws ends the iteration, as in k6.
import { blockFor, currentTags, notImplemented, record, vu } from '../context.js';
import type { Tags } from '../protocol.js';

export function check<T>(value: T, sets: Readonly<Record<string, ((value: T) => unknown) | unknown>>, tags: Tags = {}): boolean {
  let all = true;
  for (const [name, predicate] of Object.entries(sets)) {
    const ok = Boolean(typeof predicate === 'function' ? (predicate as (value: T) => unknown)(value) : predicate);
    record('checks', ok ? 1 : 0, { ...currentTags(), ...tags, check: name });
    all &&= ok;
  }
  return all;
}

export function group<T>(name: string, fn: () => T): T {
  if (name.includes('::')) throw new Error(`group name "${name}" contains "::"`);
  const outer = vu.group;
  vu.group = `${outer}::${name}`;
  const started = performance.now();
  try {
    const result = fn();
    if (result instanceof Promise) throw new Error(`group "${name}": async functions are not supported in groups (as in k6)`);
    return result;
  } finally {
    record('group_duration', performance.now() - started, currentTags());
    vu.group = outer;
  }
}

export function sleep(seconds: number): void {
  if (!Number.isFinite(seconds) || seconds < 0) throw new Error(`sleep(${seconds}): seconds must be a non-negative number`);
  blockFor(seconds * 1_000);
}

export function fail(message?: string): never {
  throw new Error(message ?? 'fail() called');
}

export function randomSeed(): never {
  throw notImplemented('k6.randomSeed');
}
