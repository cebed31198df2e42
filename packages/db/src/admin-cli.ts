import { HeraldError } from '@herald/errors';

/**
 * The operator CLIs of the services (`npm run admin`, `npm run admin:decision`): each runs one
 * command against its service's schema and prints one JSON document on stdout. Written once here:
 * reading DATABASE_URL, printing, and the exit codes (2: a usage error, 1: a refusal in the error
 * shape, or the command's own code for a result that reports a failure).
 */

/** A command line the CLI cannot run: printed with the usage, exit 2. */
export class UsageError extends Error {}

export interface AdminCommands {
  /** Runs one command; `exitCode` for a result that reports a failure (printed all the same). */
  run(argv: string[]): Promise<{ result: unknown; exitCode?: number }>;
  close(): Promise<void>;
}

export async function runAdminCli(usage: string, open: (databaseUrl: string) => Promise<AdminCommands>): Promise<void> {
  const databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) {
    process.stderr.write('DATABASE_URL is required (eval "$(deploy/infra.sh env)" sets it for the local infrastructure)\n');
    process.exit(78);
  }
  const commands = await open(databaseUrl);
  try {
    const { result, exitCode } = await commands.run(process.argv.slice(2));
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    if (exitCode) process.exitCode = exitCode;
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`${JSON.stringify({ error: err.message })}\n${usage}\n`);
      process.exitCode = 2;
    } else if (err instanceof HeraldError) {
      process.stderr.write(`${JSON.stringify({ error: err.message, code: err.code })}\n`);
      process.exitCode = 1;
    } else {
      throw err;
    }
  } finally {
    await commands.close();
  }
}
