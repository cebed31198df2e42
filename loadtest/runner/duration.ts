/** k6's duration strings: "500ms", "10s", "2m", "1h", and sums such as "1m30s". Returns milliseconds. */
export function parseDuration(text: string): number {
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)];
  if (parts.length === 0 || parts.map((part) => part[0]).join('') !== text) throw new Error(`"${text}" is not a duration such as 500ms, 10s, 2m or 1m30s`);
  const unit = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 } as const;
  return parts.reduce((total, [, amount, suffix]) => total + Number(amount) * unit[suffix as keyof typeof unit], 0);
}

export function formatDuration(ms: number): string {
  if (ms < 1) return `${(ms * 1_000).toFixed(0)}µs`;
  if (ms < 1_000) return `${ms.toFixed(2)}ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(2)}s`;
  return `${Math.floor(ms / 60_000)}m${((ms % 60_000) / 1_000).toFixed(1)}s`;
}
