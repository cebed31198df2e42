import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import type { AskRecord, Decision, Page, QuestionEvent } from '@herald/sdk';
import { type FormEvent, useEffect, useRef, useState } from 'react';

import { API, api } from '../api.js';
import { useSearchParam } from '../router.js';
import { useCan } from '../session.js';
import { ErrorNote, Table, When } from '../ui.js';
import { MyDevices } from './devices.js';

/**
 * The decisions inbox: the questions waiting for a person (GET /decisions?status=pending and, for a
 * role that may read asks, GET /ask?status=pending), kept live by GET /decisions/stream (server-sent
 * events: each open, answer or cancellation makes the lists be read again), answered in place
 * (POST /decisions/{id}, POST /ask/{id}: recorded as answeredBy the member, channel console), and the
 * settled ones with their answers, who gave them, and each one's record (GET /decisions/{id}/events,
 * GET /ask/{id}/events) when opened. `?question=<id>` (where a member's web push leads) brings that
 * question into view with focus on it. Below, the member's devices for those pushes (devices.tsx).
 */

const INBOX = ['inbox'] as const;
const LISTED = 50;

/** A decision or an ask, as the inbox shows it. */
interface Question {
  kind: 'decision' | 'ask';
  id: string;
  question: string;
  type: string;
  options: string[];
  context: string | null;
  placeholder: string | null;
  agentName: string | null;
  status: string;
  answer: string | null;
  /** Who answered (a member, a key, a Slack user, …), null until answered. */
  answeredBy: Decision['answeredBy'];
  createdAt: string;
  expiresAt: string;
}

const fromDecision = (decision: Decision): Question => ({
  kind: 'decision',
  id: decision.decisionId,
  question: decision.question,
  type: decision.type,
  options: decision.options,
  context: decision.context,
  placeholder: decision.placeholder,
  agentName: decision.agentName,
  status: decision.status,
  answer: decision.answer,
  answeredBy: decision.answeredBy,
  createdAt: decision.createdAt,
  expiresAt: decision.expiresAt,
});

const fromAsk = (ask: AskRecord): Question => ({
  kind: 'ask',
  id: ask.correlationId,
  question: ask.question,
  type: ask.type,
  options: ask.options,
  context: ask.context,
  placeholder: ask.placeholder,
  agentName: ask.agentName,
  status: ask.status,
  answer: ask.value ?? null,
  answeredBy: ask.answeredBy,
  createdAt: ask.createdAt,
  expiresAt: ask.expiresAt,
});

const newestFirst = (a: Question, b: Question) => b.createdAt.localeCompare(a.createdAt);

/** The workspace's questions of both kinds (asks only when the role may read them), newest first. */
function useQuestions(status: 'pending' | undefined, withAsks: boolean) {
  const query = status ? `status=${status}&limit=${LISTED}` : `limit=${LISTED}`;
  return useQuery({
    queryKey: [...INBOX, status ?? 'all', withAsks],
    queryFn: async () => {
      const [decisions, asks] = await Promise.all([
        api<Page<Decision>>('GET', `/decisions?${query}`),
        withAsks ? api<Page<AskRecord>>('GET', `/ask?${query}`) : Promise.resolve({ data: [] as AskRecord[] }),
      ]);
      return [...decisions.data.map(fromDecision), ...asks.data.map(fromAsk)].sort(newestFirst);
    },
  });
}

type Connection = 'connecting' | 'live' | 'reconnecting';

/** Reads the lists again on every change the stream announces; says whether it is live. */
function useLiveInbox(): Connection {
  const queryClient = useQueryClient();
  const [connection, setConnection] = useState<Connection>('connecting');
  useEffect(() => {
    const source = new EventSource(`${API}/decisions/stream`);
    const refresh = () => void queryClient.invalidateQueries({ queryKey: INBOX });
    source.addEventListener('ready', () => {
      setConnection('live');
      // Read again once listening: a question opened between the first read and now (or while the stream was away) is not missed.
      refresh();
    });
    for (const name of ['decision', 'ask', 'resync']) source.addEventListener(name, refresh);
    // The browser reconnects by itself (the stream's retry: 3 s).
    source.onerror = () => setConnection('reconnecting');
    return () => source.close();
  }, [queryClient]);
  return connection;
}

const CONNECTION_TEXT: Record<Connection, string> = {
  connecting: 'Connecting…',
  live: 'Live: new questions appear here as they are asked.',
  reconnecting: 'Reconnecting… the list may be out of date.',
};

export function InboxPage() {
  const can = useCan();
  const withAsks = can('ask', 'GET');
  const connection = useLiveInbox();
  const opened = useSearchParam('question');
  const pending = useQuestions('pending', withAsks);
  const all = useQuestions(undefined, withAsks);
  const now = Date.now();
  const waiting = (pending.data ?? []).filter((question) => new Date(question.expiresAt).getTime() > now);
  const settled = (all.data ?? []).filter((question) => question.status !== 'pending');

  return (
    <>
      <p className="help" role="status">
        {CONNECTION_TEXT[connection]}
      </p>
      <section aria-labelledby="waiting">
        <h2 id="waiting">Waiting for an answer</h2>
        <ErrorNote error={pending.error} />
        {pending.data && waiting.length === 0 ? <p>Nothing is waiting for a person.</p> : null}
        <ul className="questions">
          {waiting.map((question) => (
            <li key={question.id}>
              <PendingQuestion question={question} opened={question.id === opened} mayAnswer={can(question.kind === 'ask' ? 'ask' : 'decisions', 'POST')} />
            </li>
          ))}
        </ul>
      </section>
      <section aria-labelledby="history">
        <h2 id="history">History</h2>
        <ErrorNote error={all.error} />
        {all.data && settled.length === 0 ? <p>No question has been settled yet.</p> : null}
        {settled.length > 0 ? (
          <Table caption="Settled questions" columns={['Question', 'Asked by', 'Status', 'Answer', 'Answered by', 'Asked', 'Record']}>
            {settled.map((question) => (
              <tr key={question.id}>
                <th scope="row">{question.question}</th>
                <td>{question.agentName ?? '–'}</td>
                <td>{question.status}</td>
                <td>{question.answer ?? '–'}</td>
                <td>{question.answeredBy ? `${question.answeredBy.displayName} (${question.answeredBy.kind}, ${question.answeredBy.channel})` : '–'}</td>
                <td>
                  <When at={question.createdAt} never="–" />
                </td>
                <td>
                  <Trail question={question} />
                </td>
              </tr>
            ))}
          </Table>
        ) : null}
      </section>
      <MyDevices />
    </>
  );
}

/** One open question, answered in place: Approve or Deny (confirm), one button per option (select), a text field (input). */
function PendingQuestion({ question, mayAnswer, opened }: { question: Question; mayAnswer: boolean; opened: boolean }) {
  const queryClient = useQueryClient();
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    if (!opened) return;
    heading.current?.scrollIntoView({ block: 'center' });
    heading.current?.focus();
  }, [opened]);
  const [text, setText] = useState('');
  const headingId = `question-${question.id}`;
  const answer = useMutation({
    mutationFn: (value: string) => api('POST', `/${question.kind === 'ask' ? 'ask' : 'decisions'}/${encodeURIComponent(question.id)}`, { answer: value }),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: INBOX }),
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    answer.mutate(text);
  };

  return (
    <article className={opened ? 'question opened' : 'question'} aria-labelledby={headingId} aria-current={opened ? 'true' : undefined}>
      <h3 id={headingId} ref={heading} tabIndex={-1}>
        {question.question}
      </h3>
      {question.context ? <p>{question.context}</p> : null}
      <p className="help">
        {question.agentName ? `Asked by ${question.agentName}, ` : 'Asked '}
        <When at={question.createdAt} never="–" />; open until <When at={question.expiresAt} never="–" />.
      </p>
      {!mayAnswer ? <p className="help">Your role cannot answer questions.</p> : null}
      {mayAnswer && question.type === 'confirm' ? (
        <div className="actions">
          <button type="button" disabled={answer.isPending} onClick={() => answer.mutate('yes')}>
            Approve
          </button>
          <button type="button" className="danger" disabled={answer.isPending} onClick={() => answer.mutate('no')}>
            Deny
          </button>
        </div>
      ) : null}
      {mayAnswer && question.type === 'select' ? (
        <div className="actions" role="group" aria-label="Choose an answer">
          {question.options.map((option) => (
            <button key={option} type="button" className="secondary" disabled={answer.isPending} onClick={() => answer.mutate(option)}>
              {option}
            </button>
          ))}
        </div>
      ) : null}
      {mayAnswer && question.type === 'input' ? (
        <form onSubmit={submit}>
          <label htmlFor={`${headingId}-answer`}>Your answer</label>
          <input id={`${headingId}-answer`} required maxLength={2_000} placeholder={question.placeholder ?? undefined} value={text} onChange={(event) => setText(event.target.value)} />
          <button type="submit" disabled={answer.isPending}>
            Send answer
          </button>
        </form>
      ) : null}
      <ErrorNote error={answer.error} />
    </article>
  );
}

/** What one entry of the record says: its kind, who acted (answered, refused, viewed), through which channel, its result. */
function describeEntry(entry: QuestionEvent): string {
  const parts: string[] = [entry.kind];
  if (entry.actor) parts.push(`by ${entry.actor.displayName || entry.actor.id || entry.actor.kind || 'someone'}${entry.actor.channel ? ` (${entry.actor.channel})` : ''}`);
  if (typeof entry.detail.channel === 'string') parts.push(`via ${entry.detail.channel}`);
  const result = typeof entry.detail.result === 'string' ? `: ${entry.detail.result}` : '';
  return `${parts.join(' ')}${result}`;
}

/** A settled question's record, read when the member opens it: what happened, when, and who (oldest first). */
function Trail({ question }: { question: Question }) {
  const [open, setOpen] = useState(false);
  const events = useQuery({
    queryKey: [...INBOX, 'events', question.id],
    queryFn: () => api<Page<QuestionEvent>>('GET', `/${question.kind === 'ask' ? 'ask' : 'decisions'}/${encodeURIComponent(question.id)}/events?limit=100`),
    enabled: open,
  });
  return (
    <details onToggle={(event) => setOpen(event.currentTarget.open)}>
      <summary>Show the record</summary>
      <ErrorNote error={events.error} />
      {events.data ? (
        <ol className="trail" aria-label={`Record of ${question.question}`}>
          {events.data.data.map((entry) => (
            <li key={entry.seq}>
              <When at={entry.at} never="–" /> {describeEntry(entry)}
            </li>
          ))}
        </ol>
      ) : null}
    </details>
  );
}
