/** Waits for `done`, checked every 10 ms, at most 5 seconds. */
export async function eventually(done: () => boolean): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!done()) {
    if (Date.now() > deadline) throw new Error('not reached in 5 seconds');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
