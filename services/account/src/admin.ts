#!/usr/bin/env node
/**
 * Operator CLI: `npm run admin -- <command>`; prints one JSON document on stdout.
 *
 *   workspace create --name <n> --plan <plan> --domain <d> [--owner-external-id <id>] [--approval-mode browser|terminal] [--owner-email <address>]
 *       -> {workspaceId, siteId, siteSlug, siteKey, apiKey}   (apiKey is a dashboard-origin key)
 *          with --owner-email also {ownerMemberId, ownerSignInUrl}: the first owner and their single-use sign-in link
 *   workspace set-plan --workspace <id> --plan <none|free|starter|growth|enterprise|partner>
 *       -> {workspaceId, plan, previousPlan}
 *   key create --workspace <id> --origin <dashboard|runtime|connector> [--name <n>] [--expires-in <seconds>]
 *       -> {keyId, apiKey}
 *   key create --workspace <id> --origin bound --external-id <end-user id> ...   (Partner workspaces)
 *   key revoke --key <id> [--workspace <id>]
 *       -> {keyId, revoked: true}
 *   member invite --workspace <id> --email <address> --role <owner|admin|marketer|approver|viewer> [--name <display name>]
 *       -> {memberId, email, role, signInUrl, expiresAt}   (a single-use sign-in link: how the first owner gets in)
 *
 * Reads DATABASE_URL (and PUBLIC_ORIGIN, SIGN_IN_LINK_TTL_SECONDS for sign-in links); applies the account migrations first, so it works before the services run.
 * This interface is stable: the README quick start and every test bootstrap with it.
 */
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { outboxMigrations } from '@herald/bus';
import { loadConfig } from '@herald/config';
import { createPool, migrate, runAdminCli, UsageError, type Pool } from '@herald/db';
import { isKeyOrigin, isPlanName, isRole } from '@herald/domain';
import { HeraldError } from '@herald/errors';

import { memberSettings } from './config.js';
import { addMember, issueSignInLink } from './members.js';
import { issueKey, provisionWorkspace } from './provisioning.js';
import { APPROVAL_MODES, isApprovalMode, migrationsDir, revokeKey, SCHEMA, setPlan } from './store.js';

const usage = `usage:
  workspace create --name <n> --plan <none|free|starter|growth|enterprise|partner> --domain <d> [--owner-external-id <id>] [--approval-mode browser|terminal] [--owner-email <address>]
  workspace set-plan --workspace <id> --plan <plan>
  key create --workspace <id> --origin <dashboard|runtime|connector|bound> [--external-id <id>] [--name <n>] [--expires-in <seconds>]
  key revoke --key <id> [--workspace <id>]
  member invite --workspace <id> --email <address> --role <owner|admin|marketer|approver|viewer> [--name <display name>]`;

const optionSpec = {
  name: { type: 'string' },
  plan: { type: 'string' },
  domain: { type: 'string' },
  'owner-external-id': { type: 'string' },
  'approval-mode': { type: 'string' },
  workspace: { type: 'string' },
  origin: { type: 'string' },
  'expires-in': { type: 'string' },
  key: { type: 'string' },
  'external-id': { type: 'string' },
  email: { type: 'string' },
  role: { type: 'string' },
  'owner-email': { type: 'string' },
} as const;

function required(values: Record<string, string | undefined>, name: string): string {
  const value = values[name];
  if (value === undefined || value === '') throw new UsageError(`--${name} is required`);
  return value;
}

function planArg(value: string) {
  if (!isPlanName(value)) throw new UsageError(`--plan must be one of none, free, starter, growth, enterprise, partner`);
  return value;
}

/** Runs one command against `pool` and returns what the CLI prints. */
export async function runAdmin(pool: Pool, argv: string[]): Promise<Record<string, unknown>> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: optionSpec, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const { values, positionals } = parsed;
  const command = positionals.join(' ');
  switch (command) {
    case 'workspace create': {
      const approvalMode = values['approval-mode'] ?? 'browser';
      if (!isApprovalMode(approvalMode)) throw new UsageError(`--approval-mode must be ${APPROVAL_MODES.join(' or ')}`);
      const workspace = await provisionWorkspace(pool, {
        name: required(values, 'name'),
        plan: planArg(required(values, 'plan')),
        domain: required(values, 'domain'),
        approvalMode,
        ...(values['owner-external-id'] ? { ownerExternalId: values['owner-external-id'] } : {}),
      });
      const ownerEmail = values['owner-email'];
      if (ownerEmail === undefined) return { ...workspace };
      const owner = await addMember(pool, workspace.workspaceId, { email: ownerEmail, displayName: '', role: 'owner' });
      const link = await issueSignInLink(pool, owner.id, loadConfig(memberSettings));
      return { ...workspace, ownerMemberId: owner.id, ownerSignInUrl: link.url };
    }
    case 'workspace set-plan': {
      const workspaceId = required(values, 'workspace');
      const plan = planArg(required(values, 'plan'));
      const previousPlan = await setPlan(pool, workspaceId, plan);
      if (previousPlan === undefined) throw new HeraldError('not_found', `No workspace ${workspaceId}.`);
      return { workspaceId, plan, previousPlan };
    }
    case 'key create': {
      const origin = required(values, 'origin');
      if (!isKeyOrigin(origin)) throw new UsageError('--origin must be dashboard, runtime, connector or bound');
      // A bound key acts for exactly one end-user; no other key names one.
      const boundExternalId = origin === 'bound' ? required(values, 'external-id') : undefined;
      if (origin !== 'bound' && values['external-id'] !== undefined) throw new UsageError('--external-id goes with --origin bound');
      const expiresIn = values['expires-in'];
      let expiresAt: Date | undefined;
      if (expiresIn !== undefined) {
        const seconds = Number(expiresIn);
        if (!Number.isInteger(seconds) || seconds < 1) throw new UsageError('--expires-in is a whole number of seconds, at least 1');
        expiresAt = new Date(Date.now() + seconds * 1_000);
      }
      return {
        ...(await issueKey(pool, {
          workspaceId: required(values, 'workspace'),
          origin,
          ...(boundExternalId ? { boundExternalId } : {}),
          ...(values.name ? { name: values.name } : {}),
          ...(expiresAt ? { expiresAt } : {}),
        })),
      };
    }
    case 'key revoke': {
      const keyId = required(values, 'key');
      const owner = await revokeKey(pool, keyId, values.workspace);
      if (owner === undefined) throw new HeraldError('not_found', `No active key ${keyId}.`);
      return { keyId, revoked: true };
    }
    case 'member invite': {
      const role = required(values, 'role');
      if (!isRole(role)) throw new UsageError('--role must be owner, admin, marketer, approver or viewer');
      const member = await addMember(pool, required(values, 'workspace'), { email: required(values, 'email'), displayName: values.name ?? '', role });
      const link = await issueSignInLink(pool, member.id, loadConfig(memberSettings));
      return { memberId: member.id, email: member.email, role: member.role, signInUrl: link.url, expiresAt: link.expiresAt.toISOString() };
    }
    default:
      throw new UsageError(command === '' ? 'a command is required' : `unknown command "${command}"`);
  }
}

export interface Admin {
  run(argv: string[]): Promise<Record<string, unknown>>;
  close(): Promise<void>;
}

/** The CLI as a library, for tools that issue many commands (one pool, migrations applied once). */
export async function openAdmin(databaseUrl: string, poolSize = 2): Promise<Admin> {
  const pool = createPool({ url: databaseUrl, schema: SCHEMA, max: poolSize, applicationName: 'herald-admin' });
  try {
    await migrate(pool, SCHEMA, [outboxMigrations, { track: 'service', dir: migrationsDir }]);
  } catch (err) {
    await pool.end();
    throw err;
  }
  return { run: (argv) => runAdmin(pool, argv), close: () => pool.end() };
}

const main = () =>
  runAdminCli(usage, async (databaseUrl) => {
    const admin = await openAdmin(databaseUrl);
    return { run: async (argv) => ({ result: await admin.run(argv) }), close: admin.close };
  });

if (process.argv[1] && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
