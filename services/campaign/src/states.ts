import { HeraldError } from '@herald/errors';

import type { CampaignStatus } from './store.js';

/**
 * The campaign state machine, in one place (docs/campaigns.md has the table):
 *
 *   draft ──send──▶ sending ──(fan-out done, every push settled)──▶ completed
 *   scheduled ──send, or its time──▶ sending
 *   sending | active ──pause──▶ paused ──resume──▶ active (runs like sending, completes the same way)
 *   draft ◀──PATCH──▶ scheduled (setting or clearing scheduledAt, or status)
 *
 * Pausing a scheduled campaign is refused (409): clearing its schedule (PATCH status draft) holds it.
 */

export type CampaignAction = 'send' | 'pause' | 'resume';

export const ACTIONS: Record<CampaignAction, { from: readonly CampaignStatus[]; to: CampaignStatus }> = {
  send: { from: ['draft', 'scheduled'], to: 'sending' },
  pause: { from: ['sending', 'active'], to: 'paused' },
  resume: { from: ['paused'], to: 'active' },
};

/** Where content and schedule may still change: nothing has been sent. */
export const EDITABLE: readonly CampaignStatus[] = ['draft', 'scheduled'];

/**
 * What PATCH {status: to} does from `from`: an action's move, a schedule move, nothing (already
 * there), or undefined when the move is not allowed.
 */
export type PatchMove = { action: CampaignAction } | { schedule: 'draft' | 'scheduled' } | 'unchanged';

export function patchMove(from: CampaignStatus, to: CampaignStatus): PatchMove | undefined {
  if (from === 'completed') return undefined;
  if (from === to) return 'unchanged';
  if (to === 'draft' || to === 'scheduled') return from === 'draft' || from === 'scheduled' ? { schedule: to } : undefined;
  const action = (Object.keys(ACTIONS) as CampaignAction[]).find((name) => ACTIONS[name].to === to);
  return action && ACTIONS[action].from.includes(from) ? { action } : undefined;
}

/** 409 for a move the state machine does not allow, naming the campaign's current state. */
export function notAllowed(id: string, current: CampaignStatus, what: string, allowedFrom: readonly string[]): HeraldError {
  return new HeraldError('conflict', `Campaign ${id} is ${current}; ${what} needs it ${allowedFrom.join(' or ')}.`, {
    title: `Campaign is ${current}`,
    hint: 'Read the campaign for its current status; docs/campaigns lists the moves each status allows.',
    extra: { campaignStatus: current },
  });
}
