import { HeraldError } from '@herald/errors';
import type { Logger } from '@herald/logging';
import type { Principal } from '@herald/proto/herald/account/v1/account';
import type { FastifyRequest } from 'fastify';

import type { ServiceClients } from './clients.js';

/**
 * A key reports the machine it runs on with request headers:
 *   X-Herald-Machine-Id        stable id chosen by the client (1-128 of A-Z a-z 0-9 . _ : -), required to report
 *   X-Herald-Machine-Name      display name, e.g. the hostname (at most 200 characters)
 *   X-Herald-Machine-Platform  e.g. "linux-x64" (at most 100 characters)
 * GET /machines lists them, most recently seen first. A replica forwards each (key, machine) at
 * most once a minute; that request waits for the record, so the machine is listed once it returns,
 * but a failure to record never fails the request.
 */

const REPORT_INTERVAL_MS = 60_000;
const idPattern = /^[A-Za-z0-9._:-]{1,128}$/;

function header(request: FastifyRequest, name: string, maxLength: number): string {
  const value = request.headers[name];
  if (value === undefined) return '';
  if (typeof value !== 'string' || value.length > maxLength || /[\u0000-\u001f\u007f]/.test(value)) {
    throw new HeraldError('invalid_request', `Header ${name} must be one line of at most ${maxLength} characters.`, {
      title: 'Invalid request',
      extra: { fields: [{ field: name, in: 'header', problem: `must be at most ${maxLength} printable characters` }] },
    });
  }
  return value.trim();
}

export class MachineReporter {
  private readonly lastReported = new Map<string, number>();

  constructor(
    private readonly account: ServiceClients['account'],
    private readonly logger: Logger,
  ) {}

  async report(request: FastifyRequest, principal: Principal): Promise<void> {
    const machineId = header(request, 'x-herald-machine-id', 128);
    if (machineId === '') return;
    if (!idPattern.test(machineId)) {
      throw new HeraldError('invalid_request', 'Header x-herald-machine-id must be 1-128 characters of A-Z a-z 0-9 . _ : -', {
        title: 'Invalid request',
        extra: { fields: [{ field: 'x-herald-machine-id', in: 'header', problem: 'has characters outside A-Z a-z 0-9 . _ : -' }] },
      });
    }
    const name = header(request, 'x-herald-machine-name', 200);
    const platform = header(request, 'x-herald-machine-platform', 100);
    const key = `${principal.keyId}\u0000${machineId}\u0000${name}\u0000${platform}`;
    const now = Date.now();
    if ((this.lastReported.get(key) ?? 0) > now - REPORT_INTERVAL_MS) return;
    if (this.lastReported.size > 100_000) this.lastReported.clear();
    this.lastReported.set(key, now);
    try {
      await this.account.reportMachine({ workspaceId: principal.workspaceId, keyId: principal.keyId, machineId, name, platform });
    } catch (err) {
      this.lastReported.delete(key);
      this.logger.warn({ err }, 'machine report failed');
    }
  }
}
