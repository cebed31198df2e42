import { spawn } from 'node:child_process';

import { repoRoot } from './processes.js';

/** A server of the local infrastructure that deploy/infra.sh stops and starts on its own. */
export type InfraComponent = 'postgres' | 'redis' | 'kafka';

/**
 * Stops or starts one server of the local infrastructure as an operator would
 * (`deploy/infra.sh stop|start <component>`), in the environment given (its HERALD_*_PORT
 * variables say which set of servers). Rejects with the script's output when it fails.
 */
export function infraComponent(action: 'stop' | 'start', component: InfraComponent): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['deploy/infra.sh', action, component], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`deploy/infra.sh ${action} ${component} exited ${code}:\n${output}`))));
  });
}
