import { askingKeyLabel } from '@herald/domain';
import type { ActionsBlock, KnownBlock, ModalView } from '@slack/web-api';

import type { AnsweredByJson, QuestionRow } from './store.js';

/**
 * The Block Kit of a question's Slack message: the question, its context, the tool call it is
 * bound to, who asks and the time left, then its answers (confirm: Approve/Reject buttons; select:
 * buttons for up to 5 options, else a static select; input: a button opening a modal). Once the
 * question ends, the actions give way to how it ended and who answered. Texts are cut to Slack's
 * limits (section text 3,000, button and option text 75 characters).
 */

/** The action ids of a question's message (the actions block's block_id is `herald:<question id>`). */
export const ACTIONS = {
  yes: 'herald_yes',
  no: 'herald_no',
  /** An option's button; its value is the option's index. */
  option: 'herald_option',
  /** The static select of more than 5 options; the selected value is the option's index. */
  select: 'herald_select',
  /** Opens the input modal. */
  input: 'herald_input',
} as const;

/** The input modal's callback id, and its answer field's block and action ids. */
export const INPUT_MODAL = { callbackId: 'herald_input', blockId: 'answer', actionId: 'answer' } as const;

export const BLOCK_PREFIX = 'herald:';
const MAX_BUTTONS = 5;

const cut = (text: string, max: number): string => (text.length <= max ? text : `${text.slice(0, max - 1)}…`);
/** Text for mrkdwn: Slack's three control characters escaped. */
const escape = (text: string): string => text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
const plain = (text: string, max = 75) => ({ type: 'plain_text' as const, text: cut(text, max), emoji: true });
const section = (text: string): KnownBlock => ({ type: 'section', text: { type: 'mrkdwn', text: cut(text, 3_000) } });
/** A time as Slack renders it in each reader's own zone, with the ISO time as the fallback. */
const slackTime = (at: Date): string => `<!date^${Math.floor(at.getTime() / 1_000)}^{date_short_pretty} at {time}|${at.toISOString()}>`;

function describe(question: QuestionRow): KnownBlock[] {
  const blocks: KnownBlock[] = [section(`*${escape(question.question)}*`)];
  if (question.context) blocks.push(section(escape(question.context)));
  if (question.tool_name) {
    const fields = [{ type: 'mrkdwn' as const, text: cut(`*Tool*\n\`${escape(question.tool_name)}\``, 2_000) }];
    if (question.tool_target) fields.push({ type: 'mrkdwn', text: cut(`*Target*\n\`${escape(question.tool_target)}\``, 2_000) });
    blocks.push({ type: 'section', fields });
    if (question.parameters !== null) blocks.push(section(`*Parameters*\n\`\`\`${cut(escape(JSON.stringify(question.parameters, null, 2)), 2_900)}\`\`\``));
  }
  return blocks;
}

function actionsOf(question: QuestionRow): ActionsBlock {
  const block_id = `${BLOCK_PREFIX}${question.id}`;
  if (question.type === 'confirm') {
    return {
      type: 'actions',
      block_id,
      elements: [
        { type: 'button', action_id: ACTIONS.yes, text: plain('Approve'), value: 'yes', style: 'primary' },
        { type: 'button', action_id: ACTIONS.no, text: plain('Reject'), value: 'no' },
      ],
    };
  }
  if (question.type === 'select' && question.options.length <= MAX_BUTTONS) {
    return {
      type: 'actions',
      block_id,
      elements: question.options.map((option, index) => ({ type: 'button' as const, action_id: `${ACTIONS.option}_${index}`, text: plain(option), value: String(index) })),
    };
  }
  if (question.type === 'select') {
    return {
      type: 'actions',
      block_id,
      elements: [
        {
          type: 'static_select',
          action_id: ACTIONS.select,
          placeholder: plain('Choose an answer'),
          options: question.options.map((option, index) => ({ text: plain(option), value: String(index) })),
        },
      ],
    };
  }
  return { type: 'actions', block_id, elements: [{ type: 'button', action_id: ACTIONS.input, text: plain('Answer…'), value: 'input', style: 'primary' }] };
}

/** The message of an open question. */
export function openMessage(question: QuestionRow): { text: string; blocks: KnownBlock[] } {
  const asker = question.agent_name ? `*${escape(question.agent_name)}* asks` : 'A program asks';
  return {
    text: cut(`${question.agent_name ?? 'A program'} asks: ${question.question}`, 3_000),
    blocks: [
      ...describe(question),
      { type: 'context', elements: [{ type: 'mrkdwn', text: `${asker} with key \`${escape(askingKeyLabel(question.key_id, question.key_name))}\` · answer by ${slackTime(question.expires_at)}` }] },
      actionsOf(question),
    ],
  };
}

/** How an ended question's answer reads ("Approved", "Chose “blue”"). */
function outcome(question: QuestionRow): string {
  if (question.status === 'cancelled') return question.kind === 'ask' ? ':no_entry_sign: Withdrawn' : ':no_entry_sign: Cancelled';
  if (question.status !== 'answered') return ':hourglass: Expired unanswered';
  if (question.type === 'confirm') return question.answer === 'yes' ? ':white_check_mark: Approved' : ':x: Rejected';
  return `:speech_balloon: Answered “${escape(question.answer ?? '')}”`;
}

/** Who answered, as Slack shows a person: a mention for a Slack user, else the recorded name. */
const answererText = (by: AnsweredByJson): string => (by.kind === 'slack' ? `<@${by.id}>` : escape(by.displayName || by.id));

/** The message of a question no longer open: the description, then how it ended, by whom and when. */
export function endedMessage(question: QuestionRow): { text: string; blocks: KnownBlock[] } {
  const by = question.answered_by;
  const when = question.answered_at ?? question.cancelled_at ?? question.expires_at;
  const line = `${outcome(question)}${by ? ` by ${answererText(by)}` : ''} · ${slackTime(when)}`;
  return { text: cut(`${question.question}: ${line}`, 3_000), blocks: [...describe(question), { type: 'context', elements: [{ type: 'mrkdwn', text: line }] }] };
}

/** The input question's modal (views.open); its private_metadata is the question id. */
export function inputModal(question: QuestionRow): ModalView {
  return {
    type: 'modal',
    callback_id: INPUT_MODAL.callbackId,
    private_metadata: question.id,
    title: plain('Answer', 24),
    submit: plain('Send', 24),
    close: plain('Cancel', 24),
    blocks: [
      section(`*${escape(question.question)}*`),
      {
        type: 'input',
        block_id: INPUT_MODAL.blockId,
        label: plain('Your answer', 2_000),
        element: {
          type: 'plain_text_input',
          action_id: INPUT_MODAL.actionId,
          multiline: true,
          max_length: 2_000,
          ...(question.placeholder ? { placeholder: plain(question.placeholder, 150) } : {}),
        },
      },
    ],
  };
}

/** The "already answered" note a second click gets. */
export function alreadyEnded(question: QuestionRow): string {
  const by = question.answered_by;
  if (question.status === 'answered') return `This question was already answered${by ? ` by ${answererText(by)}` : ''}: ${outcome(question)}.`;
  return `This question is no longer open: ${outcome(question)}.`;
}
