// Agent approval: agents ask (POST /ask without waiting, then GET /ask/{id}?wait=…, the long poll
// an agent holds) at a steady rate, while a second group of virtual users, the humans, answer
// each question through the answer endpoint its link names. The wake-up latency, from the
// answer being sent to the waiting agent getting it, is a custom Trend with its own thresholds.
//
// Unlike k6, where virtual users share nothing, the two groups run in one process here and hand
// questions over through a queue in this module.
import { check } from '../runner/http.js';
import { Counter, Trend } from '../runner/metrics.js';
import { defineScenario, type Form, type Iteration } from '../runner/scenario.js';
import { ALWAYS, maxVus, budget, bearer, bootstrapKeys, bootstrapWorkspace, handleSummary, pick, SERVER_API, retireWorkspaces } from './lib/herald.js';

const wakeUp = new Trend('approval_wake_up', true);
const answered = new Counter('approval_answered');

/** Seconds an agent waits in one GET (the API allows up to 55). */
const WAIT_SECONDS = 20;

interface Question {
  correlationId: string;
  token: string;
  /** Resolves with performance.now() when the answer was sent. */
  answerSent: Promise<number>;
  markSent(at: number): void;
}

/** Questions waiting for a human, oldest first, and humans waiting for a question. */
const queue: Question[] = [];
const idleHumans: Array<(question: Question) => void> = [];

function offer(question: Question): void {
  const human = idleHumans.shift();
  if (human) human(question);
  else queue.push(question);
}

function nextQuestion(signal: AbortSignal): Promise<Question> {
  const waiting = queue.shift();
  if (waiting) return Promise.resolve(waiting);
  return new Promise((resolve, reject) => {
    const take = (question: Question): void => {
      signal.removeEventListener('abort', stop);
      resolve(question);
    };
    const stop = (): void => {
      idleHumans.splice(idleHumans.indexOf(take), 1);
      reject(new Error('stopped'));
    };
    signal.addEventListener('abort', stop, { once: true });
    idleHumans.push(take);
  });
}

interface Data {
  keys: string[];
}

const FORMS = {
  // The answer endpoint is limited per client IP (100 a minute by default): answers stay under it.
  smoke: { rate: 2, timeUnit: '1s', seconds: 4, humans: 1, keys: 1 },
  full: { rate: 3, timeUnit: '2s', seconds: 120, humans: 2, keys: 2 },
} as const;

export default defineScenario<Data>({
  name: 'approval',
  description: 'POST /ask + GET /ask/{id}?wait by agents, POST /api/v1/answer/{token} by humans; wake-up latency',
  options(form: Form) {
    const shape = FORMS[form];
    return {
      scenarios: {
        agents: {
          executor: 'constant-arrival-rate',
          rate: shape.rate,
          timeUnit: shape.timeUnit,
          duration: `${shape.seconds}s`,
          preAllocatedVUs: 10,
          maxVUs: maxVus(form, 100),
          exec: ask,
        },
        // Humans answer for as long as agents ask and a little longer (the last questions); then
        // an idle human is stopped at once.
        humans: { executor: 'constant-vus', vus: shape.humans, duration: `${shape.seconds + 2}s`, gracefulStop: '1s', exec: answer },
      },
      thresholds: {
        ...ALWAYS,
        http_req_failed: ['rate==0'],
        'http_req_duration{name:ask}': [budget(form, 500)],
        'http_req_duration{name:answer}': [budget(form, 500)],
        approval_wake_up: [budget(form, 250), ...(form === 'full' ? ['max<2000'] : [])],
        approval_answered: ['count>0'],
        dropped_iterations: ['count==0'],
      },
    };
  },
  async setup(env) {
    const { workspaceId, apiKey } = await bootstrapWorkspace('approval', 'enterprise');
    return { keys: [apiKey, ...(await bootstrapKeys(workspaceId, FORMS[env.form].keys - 1))] };
  },
  teardown: retireWorkspaces,
  handleSummary,
});

async function ask({ http, data, vu }: Iteration<Data>): Promise<void> {
  const key = pick(data.keys, vu.iterations);
  const created = await http.post(`${SERVER_API}/ask`, {
    name: 'ask',
    headers: bearer(key),
    body: { question: 'Deploy the load build?', context: 'Asked by the approval journey.', agentName: 'load-agent', wait: false },
    expected: [200],
  });
  const record = created.json<{ correlationId?: string; status?: string; liveUrl?: string }>();
  const ok = check(created, {
    'ask is 200 pending': (r) => r.status === 200 && record?.status === 'pending',
    'ask has an answer link': () => /^ask_[0-9a-f]{32}$/.test(record?.correlationId ?? '') && (record?.liveUrl ?? '').includes('/a/'),
  });
  if (!ok || !record?.correlationId || !record.liveUrl) return;
  let markSent: (at: number) => void = () => undefined;
  const answerSent = new Promise<number>((resolve) => (markSent = resolve));
  offer({ correlationId: record.correlationId, token: record.liveUrl.slice(record.liveUrl.indexOf('/a/') + 3), answerSent, markSent });

  const waited = await http.get(`${SERVER_API}/ask/${record.correlationId}?wait=${WAIT_SECONDS}`, {
    name: 'ask_wait',
    headers: bearer(key),
    expected: [200],
    timeoutMs: (WAIT_SECONDS + 10) * 1_000,
  });
  const wokenAt = performance.now();
  const result = waited.json<{ status?: string; answered?: boolean; value?: string }>();
  if (check(waited, { 'the wait returns the answer': (r) => r.status === 200 && result?.status === 'answered' && result.answered === true && result.value === 'yes' })) {
    wakeUp.add(Math.max(0, wokenAt - (await answerSent)));
  }
}

async function answer({ http, signal }: Iteration<Data>): Promise<void> {
  const question = await nextQuestion(signal);
  question.markSent(performance.now());
  const response = await http.post(`/api/v1/answer/${question.token}`, { name: 'answer', body: { answer: 'yes' }, expected: [200] });
  const record = response.json<{ correlationId?: string; status?: string; value?: string }>();
  if (check(response, { 'answer is 200 and recorded': (r) => r.status === 200 && record?.correlationId === question.correlationId && record.status === 'answered' && record.value === 'yes' })) {
    answered.add(1);
  }
}
