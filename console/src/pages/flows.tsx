import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import type { CreateFlowRequest, Flow, FlowRun, FlowStep, Page } from '@herald/sdk';
import { type FormEvent, useMemo, useState } from 'react';

import { api } from '../api.js';
import { Link, navigate, useSearchParam } from '../router.js';
import { useCan } from '../session.js';
import { DetailHeading, ErrorNote, Table, When } from '../ui.js';

/**
 * Flows: the list with activate and pause, a new flow with its steps, and a flow's page
 * (/flows?flow=<id>) where its steps are edited (PATCH replaces the whole list) and its runs are
 * shown, each with its timeline, read again every few seconds while open.
 */

const FLOWS = ['flows'] as const;
const LIVE_MS = 5_000;

const TRIGGERS: ReadonlyArray<[Flow['triggerType'], string]> = [
  ['subscription', 'A visitor subscribes'],
  ['unsubscription', 'A subscriber unsubscribes'],
  ['notification_impression', 'A push is shown'],
  ['notification_click', 'A push is clicked'],
  ['notification_dismiss', 'A push is dismissed'],
];
const triggerLabel = (trigger: string) => TRIGGERS.find(([value]) => value === trigger)?.[1] ?? trigger;

const UNITS = ['seconds', 'minutes', 'hours', 'days'] as const;

/** A step as the editor holds it: the API's type and config, plus a key that survives reordering. */
interface StepDraft {
  key: number;
  stepType: string;
  config: Record<string, unknown>;
}

let nextKey = 0;
const draftOf = (stepType: string, config: Record<string, unknown>): StepDraft => ({ key: (nextKey += 1), stepType, config });

const NEW_STEPS: ReadonlyArray<[string, string, () => Record<string, unknown>]> = [
  ['send_notification', 'Add a send step', () => ({ notification: { title: '', body: '' } })],
  ['delay', 'Add a delay', () => ({ delay: { value: 1, unit: 'hours' } })],
  ['exit', 'Add an exit', () => ({})],
];

/** A step in words, for the run timelines. */
function describeStep(step: Pick<FlowStep, 'stepType' | 'config'>): string {
  const config = step.config as { notification?: { title?: string }; templateId?: string; delay?: { value?: number; unit?: string } };
  if (step.stepType === 'send_notification') return config.notification ? `Send "${config.notification.title ?? ''}"` : `Send template ${config.templateId ?? ''}`;
  if (step.stepType === 'delay') return `Wait ${config.delay?.value ?? '?'} ${config.delay?.unit ?? ''}`;
  if (step.stepType === 'exit') return 'Exit';
  return step.stepType;
}

const flowPath = (id: string, rest = '') => `/flows/${encodeURIComponent(id)}${rest}`;

export function FlowsPage() {
  const selected = useSearchParam('flow');
  return selected ? <FlowDetail id={selected} /> : <FlowList />;
}

function StatusButtons({ flow, name }: { flow: Flow; name?: string }) {
  const can = useCan();
  const queryClient = useQueryClient();
  const move = useMutation({
    mutationFn: (action: 'activate' | 'pause') => api<Flow>('POST', flowPath(flow.id, `/${action}`)),
    onSettled: () => queryClient.invalidateQueries({ queryKey: FLOWS }),
  });
  if (!can('flows', 'POST')) return null;
  const [action, label] = flow.status === 'active' ? (['pause', 'Pause'] as const) : (['activate', 'Activate'] as const);
  return (
    <>
      <button type="button" className="secondary" disabled={move.isPending} aria-label={name === undefined ? undefined : `${label}: ${name}`} onClick={() => move.mutate(action)}>
        {label}
      </button>
      <ErrorNote error={move.error} />
    </>
  );
}

function FlowList() {
  const can = useCan();
  const flows = useQuery({ queryKey: [...FLOWS, 'list'], queryFn: () => api<Page<Flow>>('GET', '/flows?limit=100') });
  const list = flows.data?.data ?? [];
  return (
    <>
      {can('flows', 'POST') ? <NewFlow /> : null}
      <h2>Flows</h2>
      <ErrorNote error={flows.error} />
      {flows.data && list.length === 0 ? <p>No flow yet.</p> : null}
      {list.length > 0 ? (
        <Table caption="Flows, newest first" columns={['Flow', 'Starts when', 'Status', 'Steps', 'Runs', 'Updated', 'Actions']}>
          {list.map((flow) => (
            <tr key={flow.id}>
              <th scope="row">
                <Link to={`/flows?flow=${encodeURIComponent(flow.id)}`}>{flow.name}</Link>
              </th>
              <td>{triggerLabel(flow.triggerType)}</td>
              <td>{flow.status}</td>
              <td>{flow.steps.length}</td>
              <td>{flow.executionCount}</td>
              <td>
                <When at={flow.updatedAt} />
              </td>
              <td className="row-actions">
                <StatusButtons flow={flow} name={flow.name} />
              </td>
            </tr>
          ))}
        </Table>
      ) : null}
    </>
  );
}

function NewFlow() {
  const queryClient = useQueryClient();
  const [name, setName] = useState('');
  const [trigger, setTrigger] = useState<Flow['triggerType']>('subscription');
  const [steps, setSteps] = useState<StepDraft[]>([]);
  const create = useMutation({
    mutationFn: (body: CreateFlowRequest) => api<Flow>('POST', '/flows', body),
    onSuccess: (flow) => {
      setName('');
      setSteps([]);
      void queryClient.invalidateQueries({ queryKey: FLOWS });
      navigate(`/flows?flow=${encodeURIComponent(flow.id)}`);
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    create.mutate({ name, triggerType: trigger, steps: steps.map(({ stepType, config }) => ({ stepType, config })) });
  };
  return (
    <form onSubmit={submit} aria-labelledby="new-flow">
      <h2 id="new-flow">New flow</h2>
      <div className="fields two">
        <div>
          <label htmlFor="flow-name">Name</label>
          <input id="flow-name" required maxLength={200} value={name} onChange={(event) => setName(event.target.value)} />
        </div>
        <div>
          <label htmlFor="flow-trigger">Starts when</label>
          <select id="flow-trigger" value={trigger} onChange={(event) => setTrigger(event.target.value as Flow['triggerType'])}>
            {TRIGGERS.map(([value, label]) => (
              <option key={value} value={value}>
                {label}
              </option>
            ))}
          </select>
        </div>
      </div>
      <StepEditor steps={steps} onChange={setSteps} />
      <ErrorNote error={create.error} />
      <button type="submit" disabled={create.isPending}>
        Create flow
      </button>
    </form>
  );
}

/** The step list: each step's fields, move up, move down, remove; buttons add each type the API has. */
function StepEditor({ steps, onChange }: { steps: StepDraft[]; onChange: (steps: StepDraft[]) => void }) {
  const update = (index: number, config: Record<string, unknown>) => onChange(steps.map((step, at) => (at === index ? { ...step, config } : step)));
  const swap = (index: number, other: number) => {
    const next = [...steps];
    [next[index], next[other]] = [next[other] as StepDraft, next[index] as StepDraft];
    onChange(next);
  };
  return (
    <fieldset className="steps">
      <legend>Steps, in order</legend>
      {steps.length === 0 ? <p>No step yet: a flow is activated with at least one.</p> : null}
      <ol>
        {steps.map((step, index) => (
          <li key={step.key}>
            <StepFields step={step} number={index + 1} onChange={(config) => update(index, config)} />
            <div className="actions">
              <button type="button" className="secondary" disabled={index === 0} onClick={() => swap(index, index - 1)} aria-label={`Move step ${index + 1} up`}>
                Up
              </button>
              <button type="button" className="secondary" disabled={index === steps.length - 1} onClick={() => swap(index, index + 1)} aria-label={`Move step ${index + 1} down`}>
                Down
              </button>
              <button type="button" className="danger" onClick={() => onChange(steps.filter((_, at) => at !== index))} aria-label={`Remove step ${index + 1}`}>
                Remove
              </button>
            </div>
          </li>
        ))}
      </ol>
      <div className="actions">
        {NEW_STEPS.map(([stepType, label, config]) => (
          <button key={stepType} type="button" className="secondary" onClick={() => onChange([...steps, draftOf(stepType, config())])}>
            {label}
          </button>
        ))}
      </div>
    </fieldset>
  );
}

function StepFields({ step, number, onChange }: { step: StepDraft; number: number; onChange: (config: Record<string, unknown>) => void }) {
  const id = `step-${step.key}`;
  if (step.stepType === 'send_notification' && typeof step.config.notification === 'object' && step.config.notification !== null) {
    const notification = step.config.notification as Record<string, string>;
    const set = (key: string, value: string) => {
      const next: Record<string, string> = { ...notification, [key]: value };
      if (key === 'actionUrl' && value === '') delete next.actionUrl;
      onChange({ ...step.config, notification: next });
    };
    return (
      <div className="step">
        <p className="step-title">
          Step {number}: send a notification
        </p>
        <div className="fields two">
          <div>
            <label htmlFor={`${id}-title`}>Title of step {number}</label>
            <input id={`${id}-title`} required maxLength={256} value={notification.title ?? ''} onChange={(event) => set('title', event.target.value)} />
          </div>
          <div>
            <label htmlFor={`${id}-body`}>Body of step {number}</label>
            <input id={`${id}-body`} required maxLength={2048} value={notification.body ?? ''} onChange={(event) => set('body', event.target.value)} />
          </div>
          <div>
            <label htmlFor={`${id}-action`}>Step {number} opens on click</label>
            <input id={`${id}-action`} type="url" value={notification.actionUrl ?? ''} onChange={(event) => set('actionUrl', event.target.value)} />
          </div>
        </div>
      </div>
    );
  }
  if (step.stepType === 'delay') {
    const delay = (step.config.delay ?? {}) as { value?: number; unit?: string };
    return (
      <div className="step">
        <p className="step-title">
          Step {number}: wait
        </p>
        <div className="fields two">
          <div>
            <label htmlFor={`${id}-value`}>Wait in step {number}</label>
            <input id={`${id}-value`} type="number" min={1} required value={delay.value ?? 1} onChange={(event) => onChange({ delay: { ...delay, value: Number(event.target.value) } })} />
          </div>
          <div>
            <label htmlFor={`${id}-unit`}>Unit of step {number}</label>
            <select id={`${id}-unit`} value={delay.unit ?? 'hours'} onChange={(event) => onChange({ delay: { ...delay, unit: event.target.value } })}>
              {UNITS.map((unit) => (
                <option key={unit} value={unit}>
                  {unit}
                </option>
              ))}
            </select>
          </div>
        </div>
      </div>
    );
  }
  return (
    <div className="step">
      <p className="step-title">
        Step {number}: {describeStep(step).toLowerCase()}
      </p>
    </div>
  );
}

function FlowDetail({ id }: { id: string }) {
  const can = useCan();
  const queryClient = useQueryClient();
  const flow = useQuery({ queryKey: [...FLOWS, id], queryFn: () => api<Flow>('GET', flowPath(id)), refetchInterval: LIVE_MS });
  const runs = useQuery({ queryKey: [...FLOWS, id, 'runs'], queryFn: () => api<Page<FlowRun>>('GET', flowPath(id, '/runs?limit=50')), refetchInterval: LIVE_MS });
  const [steps, setSteps] = useState<StepDraft[] | undefined>(undefined);
  const save = useMutation({
    mutationFn: (next: StepDraft[]) => api<Flow>('PATCH', flowPath(id), { steps: next.map(({ stepType, config }) => ({ stepType, config })) }),
    onSuccess: () => {
      setSteps(undefined);
      void queryClient.invalidateQueries({ queryKey: FLOWS });
    },
  });
  const current = flow.data;
  const saved = useMemo(() => current?.steps.map((step) => draftOf(step.stepType, step.config)) ?? [], [current]);
  const editing = steps ?? saved;
  return (
    <>
      <DetailHeading back="/flows" backLabel="All flows" title={current?.name ?? 'Flow'} focusKey={id} />
      <ErrorNote error={flow.error} />
      {current ? (
        <>
          <p>
            Starts when: {triggerLabel(current.triggerType)}. Status: <strong>{current.status}</strong>. Runs started: {current.executionCount}.
          </p>
          <div className="actions">
            <StatusButtons flow={current} />
          </div>
          {can('flows', 'POST') ? (
            <form
              onSubmit={(event) => {
                event.preventDefault();
                save.mutate(editing);
              }}
              aria-label="Steps"
            >
              <StepEditor steps={editing} onChange={setSteps} />
              <ErrorNote error={save.error} />
              <button type="submit" disabled={save.isPending || steps === undefined}>
                Save steps
              </button>
            </form>
          ) : (
            <ol>
              {current.steps.map((step) => (
                <li key={step.id}>{describeStep(step)}</li>
              ))}
            </ol>
          )}
          <h2>Runs</h2>
          <ErrorNote error={runs.error} />
          {runs.data && runs.data.data.length === 0 ? <p>No run yet: an active flow starts one for each event of its trigger.</p> : null}
          <ul className="runs">
            {(runs.data?.data ?? []).map((run) => (
              <li key={run.id}>
                <RunTimeline run={run} steps={current.steps} />
              </li>
            ))}
          </ul>
        </>
      ) : null}
    </>
  );
}

/** What a run did, in order: its start, the steps it passed, where it waits or how it ended. */
function RunTimeline({ run, steps }: { run: FlowRun; steps: FlowStep[] }) {
  const ended = run.finishedAt !== null;
  // currentStep is the step it runs next; a waiting run is parked on the delay before it.
  const position = ended ? (run.state === 'completed' ? steps.length : 0) : (run.currentStep ?? 0);
  const waitingOn = run.state === 'waiting' && position > 0 ? steps[position - 1] : undefined;
  const done = steps.slice(0, waitingOn ? position - 1 : position);
  const next = ended ? undefined : steps[position];
  return (
    <article aria-label={`Run for subscriber ${run.subscriberId}`}>
      <p className="run-head">
        Subscriber <code>{run.subscriberId}</code>: <strong>{run.state}</strong>
      </p>
      <ol className="timeline">
        <li>
          <When at={run.createdAt} />: started ({triggerLabel(run.triggerType).toLowerCase()})
        </li>
        {done.map((step) => (
          <li key={step.id}>
            Step {step.stepOrder + 1} done: {describeStep(step)}
          </li>
        ))}
        {waitingOn ? (
          <li>
            Step {waitingOn.stepOrder + 1} waiting: {describeStep(waitingOn)} (until <When at={run.nextWakeUpAt} />)
          </li>
        ) : null}
        {next ? (
          <li>
            Step {next.stepOrder + 1} next: {describeStep(next)}
          </li>
        ) : null}
        {run.notificationIds.length > 0 ? <li>Notifications sent: {run.notificationIds.map((notificationId) => <code key={notificationId}>{notificationId} </code>)}</li> : null}
        {ended ? (
          <li>
            <When at={run.finishedAt} />: {run.state}
            {run.endReason ? ` (${run.endReason})` : ''}
          </li>
        ) : null}
      </ol>
    </article>
  );
}
