/**
 * The security suite's count of attacker inputs per class (issue #22): each file records what it
 * sends and prints the counts when it ends; the README's "Security suite" section lists them.
 */

const tried = new Map<string, number>();

export function recordTried(kind: string, count = 1): void {
  tried.set(kind, (tried.get(kind) ?? 0) + count);
}

export function reportTried(file: string): void {
  process.stdout.write(`security inputs tried (${file}): ${JSON.stringify(Object.fromEntries(tried))}\n`);
}
