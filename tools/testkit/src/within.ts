/**
 * `work`, or a rejection naming `step` once `limitMs` has passed without it: a wait that would
 * never end becomes a failure that says what was waited for. The work itself is not cancelled.
 */
export async function within<T>(step: string, limitMs: number, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${step}: still pending after ${(limitMs / 1_000).toFixed(1)} s`)), Math.max(0, limitMs));
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}
