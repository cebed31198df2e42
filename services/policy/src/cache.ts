import type { Pool } from '@herald/db';

import { compile, forget, preparse, type CompiledPolicy } from './cedar.js';
import * as store from './store.js';

/**
 * Each replica keeps every workspace's policy preparsed (in cedar-wasm, keyed by workspace id)
 * together with the version it was compiled from. Every evaluation first reads the current
 * version (one indexed primary-key lookup); a different version reloads and re-preparses, so a
 * PUT is in force on every replica from the next request on.
 */
export type Loaded = { version: string; compiled: CompiledPolicy | null; setId: string };

export class PolicyCache {
  private readonly entries = new Map<string, Loaded>();

  constructor(
    private readonly pool: Pool,
    private readonly maxEntries: number,
  ) {}

  /** The workspace's policy as of now; `compiled` null when it has none. */
  async current(workspaceId: string): Promise<Loaded> {
    const version = (await store.policyVersion(this.pool, workspaceId)) ?? '0';
    const cached = this.entries.get(workspaceId);
    if (cached && cached.version === version) {
      // Most recently used last.
      this.entries.delete(workspaceId);
      this.entries.set(workspaceId, cached);
      return cached;
    }
    const row = await store.findPolicy(this.pool, workspaceId);
    return this.install(workspaceId, row?.version ?? '0', row?.policy ?? null);
  }

  /** Compiles and preparses synchronously, so the wasm set and the cached entry always agree. */
  install(workspaceId: string, version: string, text: string | null): Loaded {
    let compiled: CompiledPolicy | null = null;
    if (text !== null) {
      const result = compile(text);
      // Stored policies were validated on write; one that no longer compiles denies everything.
      if (!result.ok) throw new Error(`stored policy of ${workspaceId} v${version} does not compile: ${result.problems[0]?.message}`);
      compiled = result.compiled;
      preparse(workspaceId, compiled);
    } else {
      forget(workspaceId);
    }
    const loaded = { version, compiled, setId: workspaceId };
    this.entries.delete(workspaceId);
    this.entries.set(workspaceId, loaded);
    while (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
      forget(oldest);
    }
    return loaded;
  }
}
