import { useInfiniteQuery, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import type { EvaluatePolicyRequest, Page, PolicyDocument, PolicyEvaluation, PolicyVersion, PolicyVersionText, Scalar } from '@herald/sdk';
import { type FormEvent, type RefObject, useRef, useState } from 'react';

import { api, ApiError } from '../api.js';
import { useCan } from '../session.js';
import { membersQuery } from './members.js';
import { Dialog, ErrorNote, Table, When } from '../ui.js';

/**
 * The workspace's Cedar policy: an editor with a line-number gutter (a plain <textarea>: no editor
 * library in the initial script), Validate and Save showing each problem at its line and column (a
 * click puts the caret there), "Try it" (POST /policy/evaluate: a sample call against the draft or
 * the saved policy, recording nothing), and the past versions, each viewable and restorable into
 * the editor. Roles that may not change the policy read it, its versions, and nothing more.
 */

const POLICY = ['policy'] as const;
const VERSIONS = ['policy', 'versions'] as const;
const VERSIONS_PAGE = 20;
/** Validate evaluates the draft with a placeholder call: only its problems matter. */
const VALIDATION_CALL = 'validate';

/** A problem of an invalid policy, as the API's 400 lists them. */
interface Problem {
  message: string;
  policyId?: string;
  line?: number;
  column?: number;
  help?: string;
}

type Report = { kind: 'valid' } | { kind: 'saved'; version: number } | { kind: 'restored'; version: number } | { kind: 'problems'; problems: Problem[]; saving: boolean } | { kind: 'error'; error: unknown };

/** The problems of an invalid policy's 400, if that is what `error` is. */
function problemsOf(error: unknown): Problem[] | undefined {
  if (!(error instanceof ApiError) || error.status !== 400) return undefined;
  const problems = (error.body as { problems?: unknown }).problems;
  return Array.isArray(problems) ? (problems as Problem[]) : undefined;
}

/** A failed check or save: its problems when the policy was invalid, else the error. */
const reportOf = (error: unknown, saving: boolean): Report => {
  const problems = problemsOf(error);
  return problems ? { kind: 'problems', problems, saving } : { kind: 'error', error };
};

/** The string offset of a 1-based line and column of `text` (clamped to the text). */
function offsetOf(text: string, line: number, column: number): number {
  const lines = text.split('\n');
  let offset = 0;
  for (let index = 0; index < Math.min(line - 1, lines.length - 1); index += 1) offset += (lines[index]?.length ?? 0) + 1;
  const lineText = lines[Math.min(line, lines.length) - 1] ?? '';
  return offset + Math.min(Math.max(column - 1, 0), lineText.length);
}

/** The 1-based line and column of a string offset of `text`. */
function positionOf(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, offset).split('\n');
  return { line: before.length, column: (before.at(-1)?.length ?? 0) + 1 };
}

export function PolicyPage() {
  const can = useCan();
  const editable = can('policy', 'PUT');
  const queryClient = useQueryClient();
  const saved = useQuery({ queryKey: POLICY, queryFn: () => api<PolicyDocument>('GET', '/policy') });
  // Undefined until the member types or restores: the editor shows the saved text.
  const [edited, setEdited] = useState<string | undefined>(undefined);
  const [report, setReport] = useState<Report | undefined>(undefined);
  const editor = useRef<HTMLTextAreaElement>(null);
  const draft = edited ?? saved.data?.policy ?? '';

  const edit = (text: string) => {
    setEdited(text);
    setReport(undefined);
  };
  const validate = useMutation({
    mutationFn: (text: string) => api<PolicyEvaluation>('POST', '/policy/evaluate', { policy: text, toolName: VALIDATION_CALL } satisfies EvaluatePolicyRequest),
    onSuccess: () => setReport({ kind: 'valid' }),
    onError: (error) => setReport(reportOf(error, false)),
  });
  const save = useMutation({
    mutationFn: (text: string) => api<PolicyDocument>('PUT', '/policy', { policy: text }),
    onSuccess: (document) => {
      queryClient.setQueryData(POLICY, document);
      setEdited(undefined);
      setReport({ kind: 'saved', version: document.version });
      void queryClient.invalidateQueries({ queryKey: VERSIONS });
    },
    onError: (error) => setReport(reportOf(error, true)),
  });
  const restore = (version: PolicyVersionText) => {
    setEdited(version.policy ?? '');
    setReport({ kind: 'restored', version: version.version });
    editor.current?.focus();
  };
  const problems = report?.kind === 'problems' ? report.problems : [];

  return (
    <>
      <ErrorNote error={saved.error} />
      <p>
        {saved.data
          ? saved.data.policy === null
            ? 'The workspace has no policy: every call is denied.'
            : `Version ${saved.data.version} is in force.`
          : null}{' '}
        Policies are Cedar over Herald's schema: <a href="/docs/policy">the policy documentation</a>.
      </p>
      <section aria-labelledby="editor-heading">
        <h2 id="editor-heading">Editor</h2>
        <Editor text={draft} onChange={edit} readOnly={!editable} problems={problems} textarea={editor} />
        {editable ? (
          <div className="actions">
            <button type="button" className="secondary" disabled={validate.isPending} onClick={() => validate.mutate(draft)}>
              Validate
            </button>
            <button type="button" disabled={save.isPending} onClick={() => save.mutate(draft)}>
              Save
            </button>
          </div>
        ) : null}
        <ReportView report={report} text={draft} textarea={editor} />
      </section>
      {editable ? <TryIt draft={draft} onProblems={setReport} /> : null}
      <Versions current={saved.data?.version} onRestore={editable ? restore : undefined} />
    </>
  );
}

function Editor({ text, onChange, readOnly, problems, textarea }: { text: string; onChange: (text: string) => void; readOnly: boolean; problems: Problem[]; textarea: RefObject<HTMLTextAreaElement | null> }) {
  const gutter = useRef<HTMLPreElement>(null);
  const [caret, setCaret] = useState({ line: 1, column: 1 });
  const lineCount = text.split('\n').length;
  const badLines = new Set(problems.flatMap((problem) => (problem.line === undefined ? [] : [problem.line])));
  const follow = () => {
    const element = textarea.current;
    if (!element) return;
    if (gutter.current) gutter.current.scrollTop = element.scrollTop;
    setCaret(positionOf(element.value, element.selectionStart));
  };
  return (
    <>
      <label htmlFor="policy-text">Cedar policy</label>
      <div className="editor">
        <pre className="gutter" ref={gutter} aria-hidden="true">
          {Array.from({ length: lineCount }, (_, index) => (
            <span key={index} className={badLines.has(index + 1) ? 'bad' : undefined}>
              {index + 1}
              {'\n'}
            </span>
          ))}
        </pre>
        <textarea
          id="policy-text"
          ref={textarea}
          value={text}
          readOnly={readOnly}
          spellCheck={false}
          wrap="off"
          rows={Math.min(Math.max(lineCount + 1, 12), 30)}
          aria-describedby="policy-caret"
          onChange={(event) => onChange(event.target.value)}
          onSelect={follow}
          onScroll={follow}
        />
      </div>
      <p id="policy-caret" className="help">
        Line {caret.line}, column {caret.column}
        {readOnly ? ' (read only: your role cannot change the policy)' : ''}
      </p>
    </>
  );
}

function ReportView({ report, text, textarea }: { report: Report | undefined; text: string; textarea: RefObject<HTMLTextAreaElement | null> }) {
  const moveTo = (problem: Problem) => {
    const element = textarea.current;
    if (!element || problem.line === undefined) return;
    const offset = offsetOf(text, problem.line, problem.column ?? 1);
    element.focus();
    element.setSelectionRange(offset, offset);
  };
  return (
    <div role="status" className="report">
      {report?.kind === 'valid' ? <p>The draft is valid.</p> : null}
      {report?.kind === 'saved' ? <p>Saved: version {report.version} is in force.</p> : null}
      {report?.kind === 'restored' ? <p>Version {report.version} is in the editor; Save puts it in force again.</p> : null}
      {report?.kind === 'error' ? <ErrorNote error={report.error} /> : null}
      {report?.kind === 'problems' ? (
        <>
          <p className="error">
            {report.problems.length === 1 ? 'The draft has a problem' : `The draft has ${report.problems.length} problems`}
            {report.saving ? '; nothing was saved.' : '.'}
          </p>
          <ul className="problems" aria-label="Problems">
            {report.problems.map((problem, index) => (
              <li key={index}>
                {problem.line !== undefined ? (
                  <button type="button" className="link" onClick={() => moveTo(problem)}>
                    Line {problem.line}, column {problem.column}
                  </button>
                ) : null}{' '}
                {problem.message}
                {problem.policyId ? ` (policy ${problem.policyId})` : ''}
                {problem.help ? <span className="help"> {problem.help}</span> : null}
              </li>
            ))}
          </ul>
        </>
      ) : null}
    </div>
  );
}

interface Sample {
  toolName: string;
  toolTarget: string;
  actor: string;
  environment: string;
  externalId: string;
  parameters: string;
  against: 'draft' | 'saved';
}

const SAMPLE_FIELDS: Array<{ field: Exclude<keyof Sample, 'parameters' | 'against'>; label: string; help: string }> = [
  { field: 'toolName', label: 'Tool name', help: 'resource.name (required)' },
  { field: 'toolTarget', label: 'Tool target', help: 'resource.target' },
  { field: 'actor', label: 'Actor', help: 'principal.actor' },
  { field: 'environment', label: 'Environment', help: 'context.environment' },
  { field: 'externalId', label: 'External id', help: 'principal.externalId' },
];

/** The sample's parameters: a JSON object of scalars, or the reason it is not one. */
function parametersOf(text: string): Record<string, Scalar> | string {
  if (text.trim() === '') return {};
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return 'Parameters must be a JSON object, e.g. {"amount": 40}.';
    return parsed as Record<string, Scalar>;
  } catch {
    return 'Parameters are not valid JSON.';
  }
}

function TryIt({ draft, onProblems }: { draft: string; onProblems: (report: Report) => void }) {
  const [sample, setSample] = useState<Sample>({ toolName: '', toolTarget: '', actor: '', environment: '', externalId: '', parameters: '', against: 'draft' });
  const [invalid, setInvalid] = useState<string | undefined>(undefined);
  const evaluate = useMutation({
    mutationFn: (body: EvaluatePolicyRequest) => api<PolicyEvaluation>('POST', '/policy/evaluate', body),
    onError: (error) => {
      const problems = problemsOf(error);
      if (problems) onProblems({ kind: 'problems', problems, saving: false });
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const parameters = parametersOf(sample.parameters);
    if (typeof parameters === 'string') {
      setInvalid(parameters);
      evaluate.reset();
      return;
    }
    setInvalid(undefined);
    const optional = (value: string) => (value.trim() === '' ? undefined : value.trim());
    const body: EvaluatePolicyRequest = { toolName: sample.toolName.trim(), parameters };
    for (const field of ['toolTarget', 'actor', 'environment', 'externalId'] as const) {
      const value = optional(sample[field]);
      if (value !== undefined) body[field] = value;
    }
    if (sample.against === 'draft') body.policy = draft;
    evaluate.mutate(body);
  };
  const result = evaluate.data;
  return (
    <form className="inline" onSubmit={submit} aria-labelledby="try-heading">
      <h2 id="try-heading">Try it</h2>
      <p className="help">A sample call, evaluated as POST /authorize would, with you as the principal; nothing is recorded.</p>
      <div className="fields">
        {SAMPLE_FIELDS.map(({ field, label, help }) => (
          <div key={field}>
            <label htmlFor={`sample-${field}`}>{label}</label>
            <input
              id={`sample-${field}`}
              required={field === 'toolName'}
              aria-describedby={`sample-${field}-help`}
              value={sample[field]}
              onChange={(event) => setSample({ ...sample, [field]: event.target.value })}
            />
            <p id={`sample-${field}-help`} className="help">
              {help}
            </p>
          </div>
        ))}
        <div>
          <label htmlFor="sample-parameters">Parameters</label>
          <textarea id="sample-parameters" rows={2} aria-describedby="sample-parameters-help" value={sample.parameters} onChange={(event) => setSample({ ...sample, parameters: event.target.value })} />
          <p id="sample-parameters-help" className="help">
            A JSON object of scalars, the resource's tags, e.g. {'{"amount": 40}'}.
          </p>
        </div>
      </div>
      <fieldset>
        <legend>Evaluate against</legend>
        {(
          [
            ['draft', 'The draft in the editor'],
            ['saved', 'The saved policy'],
          ] as const
        ).map(([value, label]) => (
          <div key={value} className="choice">
            <input type="radio" id={`against-${value}`} name="against" value={value} checked={sample.against === value} onChange={() => setSample({ ...sample, against: value })} />
            <label htmlFor={`against-${value}`}>{label}</label>
          </div>
        ))}
      </fieldset>
      <button type="submit" disabled={evaluate.isPending}>
        Evaluate
      </button>
      <div role="status">
        {invalid ? <p className="error">{invalid}</p> : null}
        {result ? (
          <p className={`verdict verdict-${result.verdict}`}>
            Verdict: <strong>{result.verdict}</strong>
            {result.policy ? ` (policy ${result.policy})` : ''}: {result.reason}
            {result.version === null ? ' (the draft)' : ` (saved version ${result.version})`}
          </p>
        ) : null}
      </div>
      <ErrorNote error={evaluate.error} />
    </form>
  );
}

function Versions({ current, onRestore }: { current: number | undefined; onRestore: ((version: PolicyVersionText) => void) | undefined }) {
  const can = useCan();
  const [viewing, setViewing] = useState<number | undefined>(undefined);
  const versions = useInfiniteQuery({
    queryKey: VERSIONS,
    queryFn: ({ pageParam }) => api<Page<PolicyVersion>>('GET', `/policy/versions?limit=${VERSIONS_PAGE}${pageParam ? `&cursor=${encodeURIComponent(pageParam)}` : ''}`),
    initialPageParam: undefined as string | undefined,
    getNextPageParam: (last) => (last.hasMore && last.nextCursor ? last.nextCursor : undefined),
  });
  // Members' names, for the roles that may read them; others see the member's id.
  const members = useQuery({ ...membersQuery, enabled: can('members', 'GET') });
  const who = (version: PolicyVersion): string => {
    const changer = version.changedBy;
    if (!changer) return 'Not recorded';
    if (changer.kind === 'key') return `API key ${changer.id}`;
    const member = members.data?.data.find((entry) => entry.id === changer.id);
    return member ? `${member.displayName || member.email} (member)` : `Member ${changer.id}`;
  };
  const rows = versions.data?.pages.flatMap((page) => page.data) ?? [];
  return (
    <section aria-labelledby="versions-heading">
      <h2 id="versions-heading">Past versions</h2>
      <ErrorNote error={versions.error} />
      {versions.data && rows.length === 0 ? <p>No version yet: the policy was never written.</p> : null}
      {rows.length > 0 ? (
        <Table caption="Versions of the policy, newest first" columns={['Version', 'Written', 'By', 'Text']}>
          {rows.map((version) => (
            <tr key={version.version}>
              <th scope="row">
                {version.version}
                {version.version === current ? ' (in force)' : ''}
              </th>
              <td>
                <When at={version.createdAt} />
              </td>
              <td>{who(version)}</td>
              <td>
                {version.deleted ? (
                  'Deleted: no policy'
                ) : (
                  <button type="button" className="secondary" onClick={() => setViewing(version.version)}>
                    View version {version.version}
                  </button>
                )}
              </td>
            </tr>
          ))}
        </Table>
      ) : null}
      {versions.hasNextPage ? (
        <button type="button" className="secondary" disabled={versions.isFetchingNextPage} onClick={() => void versions.fetchNextPage()}>
          Show older versions
        </button>
      ) : null}
      <Dialog open={viewing !== undefined} title={`Version ${viewing ?? ''}`} onClose={() => setViewing(undefined)}>
        {viewing !== undefined ? (
          <VersionView
            version={viewing}
            onRestore={
              onRestore &&
              ((text) => {
                setViewing(undefined);
                onRestore(text);
              })
            }
            onClose={() => setViewing(undefined)}
          />
        ) : null}
      </Dialog>
    </section>
  );
}

function VersionView({ version, onRestore, onClose }: { version: number; onRestore: ((version: PolicyVersionText) => void) | undefined; onClose: () => void }) {
  const text = useQuery({ queryKey: [...VERSIONS, version], queryFn: () => api<PolicyVersionText>('GET', `/policy/versions/${version}`) });
  return (
    <>
      <ErrorNote error={text.error} />
      {text.data ? (
        <pre className="version-text" tabIndex={0} aria-label={`The text of version ${version}`}>
          {text.data.policy}
        </pre>
      ) : null}
      <div className="actions">
        {onRestore && text.data ? (
          <button type="button" onClick={() => text.data && onRestore(text.data)}>
            Restore into the editor
          </button>
        ) : null}
        <button type="button" className="secondary" onClick={onClose}>
          Close
        </button>
      </div>
    </>
  );
}
