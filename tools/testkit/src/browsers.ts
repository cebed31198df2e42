import { existsSync } from 'node:fs';

/** Debian's browser, installed by deploy/tools.sh; a missing one fails the test file by name. */
export function browserPath(envName: string, fallback: string): string {
  const path = process.env[envName] || fallback;
  if (!existsSync(path)) throw new Error(`${path} is not installed: run deploy/tools.sh (it installs Debian's chromium and firefox-esr), or set ${envName}.`);
  return path;
}

/** Debian's Chromium (HERALD_CHROMIUM overrides). */
export const chromiumPath = (): string => browserPath('HERALD_CHROMIUM', '/usr/bin/chromium');
/** Debian's Firefox ESR (HERALD_FIREFOX overrides). */
export const firefoxPath = (): string => browserPath('HERALD_FIREFOX', '/usr/bin/firefox-esr');
