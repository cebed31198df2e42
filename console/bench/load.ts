import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

import { chromiumPath } from '@herald/testkit';
import { chromium } from 'playwright-core';

import type { ConsoleManifest } from '../build/bundle.js';
import { signInThroughConsole, startConsoleHarness } from '../test/support.js';

/**
 * The console's cold load over loopback: a signed-in member opens /console/ in a browser with an
 * empty cache; measured from the navigation's start until the overview is interactive (its heading
 * and its figures rendered from the API). Printed beside the budget of 1 s, with the initial JS's
 * gzipped size beside its budget. Needs the infrastructure (DATABASE_URL) and a built console.
 *   npm run bench:console [-- <runs>]
 */

const INTERACTIVE_BUDGET_MS = 1_000;
const INITIAL_JS_BUDGET = 150 * 1024;
const runs = Number(process.argv[2] ?? 10);

const manifest = JSON.parse(await readFile(fileURLToPath(new URL('../app/manifest.json', import.meta.url)), 'utf8')) as ConsoleManifest;
const harness = await startConsoleHarness();
const browser = await chromium.launch({ executablePath: chromiumPath(), headless: true, args: ['--no-sandbox'] });
try {
  // One signed-in session; each run is a new context holding only its cookie (no cached asset).
  const signedIn = await browser.newContext();
  await signInThroughConsole(await signedIn.newPage(), harness, harness.ownerEmail);
  const cookies = (await signedIn.cookies()).filter((cookie) => cookie.name === 'herald_session');
  await signedIn.close();

  const timings: number[] = [];
  for (let run = 0; run < runs; run += 1) {
    const context = await browser.newContext();
    await context.addCookies(cookies);
    const page = await context.newPage();
    await page.goto(`${harness.origin}/console/`, { waitUntil: 'commit' });
    // The overview's figures have their numbers (not the "…" shown while loading).
    await page.getByRole('definition').filter({ hasText: /^\d+$/ }).first().waitFor();
    await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
    timings.push(await page.evaluate(() => performance.now()));
    if (process.env.BENCH_DETAIL) {
      console.log(await page.evaluate(() => JSON.stringify(performance.getEntries().map((entry) => [entry.name.replace(location.origin, ''), Math.round(entry.startTime), Math.round(entry.duration)]))));
    }
    await context.close();
  }
  timings.sort((a, b) => a - b);
  const median = timings[Math.floor(timings.length / 2)] ?? 0;
  const worst = timings[timings.length - 1] ?? 0;
  console.log(`console cold load to interactive overview, ${runs} runs: median ${median.toFixed(0)} ms, worst ${worst.toFixed(0)} ms (budget ${INTERACTIVE_BUDGET_MS} ms)`);
  console.log(`console initial JS: ${(manifest.initialJsGzipBytes / 1024).toFixed(1)} KB gzipped (budget ${INITIAL_JS_BUDGET / 1024} KB)`);
  if (median > INTERACTIVE_BUDGET_MS || manifest.initialJsGzipBytes > INITIAL_JS_BUDGET) process.exitCode = 1;
} finally {
  await browser.close();
  await harness.stop();
}
