import { spawn } from 'node:child_process';

import { repoRoot } from './env.js';

/** A server of the local infrastructure that deploy/infra.sh stops and starts on its own. */
export type InfraComponent = 'postgres' | 'redis' | 'kafka';

/**
 * Stops, starts or crashes one server of the local infrastructure as an operator (or the kernel)
 * would (`deploy/infra.sh stop|start|crash <component>`), or reads its pid (`pid`), in the
 * environment given (its HERALD_*_PORT variables say which set of servers). Resolves with what the
 * script printed on its standard output (for `crash` the pid it killed, for `pid` the running
 * one); rejects with all its output when it fails (`crash` and `pid` fail when the server was not
 * running).
 */
export function infraComponent(action: 'stop' | 'start' | 'crash' | 'pid', component: InfraComponent): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['deploy/infra.sh', action, component], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      output += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('exit', (code) => (code === 0 ? resolve(stdout.trim()) : reject(new Error(`deploy/infra.sh ${action} ${component} exited ${code}:\n${output}`))));
  });
}
