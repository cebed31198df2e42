import { meter } from '@herald/telemetry';

/** The policy service's metrics: /authorize verdicts (REST and MCP alike). */
const verdicts = meter('policy').createCounter('herald.authorize.verdicts', {
  description: 'Tool calls evaluated against a workspace policy, by verdict (allow, deny, requires_human)',
  unit: '{call}',
});

export function countVerdict(verdict: string): void {
  verdicts.add(1, { verdict });
}
