import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import type { Campaign, CampaignStats, CampaignStatsSeries, CreateCampaignRequest, Page, Segment, Site } from '@herald/sdk';
import { type FormEvent, useState } from 'react';

import { api } from '../api.js';
import { Link, navigate, useSearchParam } from '../router.js';
import { useCan } from '../session.js';
import { DetailHeading, ErrorNote, Table, When } from '../ui.js';
import { StatsChart } from './campaign-chart.js';

/**
 * Campaigns: the list with each one's moves (send now, pause, resume), composing one with a live
 * preview of the notification, and a campaign's page (/campaigns?campaign=<id>) with its counters
 * and the chart of GET /campaigns/{id}/stats/series, read again every few seconds while open.
 */

const CAMPAIGNS = ['campaigns'] as const;
const LIVE_MS = 5_000;
type Move = 'send' | 'pause' | 'resume';

/** The moves the state machine allows from each status (docs/campaigns.md). */
const MOVES: Record<Campaign['status'], Array<{ move: Move; label: string }>> = {
  draft: [{ move: 'send', label: 'Send now' }],
  scheduled: [{ move: 'send', label: 'Send now' }],
  sending: [{ move: 'pause', label: 'Pause' }],
  active: [{ move: 'pause', label: 'Pause' }],
  paused: [{ move: 'resume', label: 'Resume' }],
  completed: [],
};

const campaignPath = (id: string, rest = '') => `/campaigns/${encodeURIComponent(id)}${rest}`;

type Bucket = 'minute' | 'hour' | 'day';
const BUCKET_MS: Record<Bucket, number> = { minute: 60_000, hour: 3_600_000, day: 86_400_000 };
/** A new campaign's chart still spans this many buckets (the API starts at its creation by default). */
const AT_LEAST = 30;

/** The series query: from the campaign's creation (the API's default), or the last AT_LEAST buckets when it is younger. */
function seriesPath(id: string, bucket: Bucket, createdAt: string | undefined): string {
  const earliest = Date.now() - AT_LEAST * BUCKET_MS[bucket];
  const young = createdAt === undefined || Date.parse(createdAt) > earliest;
  return campaignPath(id, `/stats/series?bucket=${bucket}${young ? `&from=${encodeURIComponent(new Date(earliest).toISOString())}` : ''}`);
}

export function CampaignsPage() {
  const selected = useSearchParam('campaign');
  return selected ? <CampaignDetail id={selected} /> : <CampaignList />;
}

function useMove() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: ({ id, move }: { id: string; move: Move }) => api<Campaign>('POST', campaignPath(id, `/${move}`)),
    onSettled: () => queryClient.invalidateQueries({ queryKey: CAMPAIGNS }),
  });
}

function MoveButtons({ campaign, name }: { campaign: Campaign; name?: string }) {
  const can = useCan();
  const move = useMove();
  if (!can('campaigns', 'POST')) return null;
  return (
    <>
      {MOVES[campaign.status].map(({ move: action, label }) => (
        <button
          key={action}
          type="button"
          className="secondary"
          disabled={move.isPending}
          aria-label={name === undefined ? undefined : `${label}: ${name}`}
          onClick={() => move.mutate({ id: campaign.id, move: action })}
        >
          {label}
        </button>
      ))}
      <ErrorNote error={move.error} />
    </>
  );
}

function CampaignList() {
  const can = useCan();
  const campaigns = useQuery({ queryKey: [...CAMPAIGNS, 'list'], queryFn: () => api<Page<Campaign>>('GET', '/campaigns?limit=50'), refetchInterval: LIVE_MS });
  const list = campaigns.data?.data ?? [];
  return (
    <>
      {can('campaigns', 'POST') ? <Compose /> : null}
      <h2 id="campaign-list">Campaigns</h2>
      <ErrorNote error={campaigns.error} />
      {campaigns.data && list.length === 0 ? <p>No campaign yet.</p> : null}
      {list.length > 0 ? (
        <Table caption="Campaigns, newest first" columns={['Campaign', 'Status', 'Targeted', 'Sent', 'Delivered', 'Clicked', 'Created', 'Actions']}>
          {list.map((campaign) => (
            <tr key={campaign.id}>
              <th scope="row">
                <Link to={`/campaigns?campaign=${encodeURIComponent(campaign.id)}`}>{campaign.name}</Link>
              </th>
              <td>
                <Status campaign={campaign} />
              </td>
              <td>{campaign.totalTargeted}</td>
              <td>{campaign.totalSent}</td>
              <td>{campaign.totalDelivered}</td>
              <td>{campaign.totalClicked}</td>
              <td>
                <When at={campaign.createdAt} />
              </td>
              <td className="row-actions">
                <MoveButtons campaign={campaign} name={campaign.name} />
              </td>
            </tr>
          ))}
        </Table>
      ) : null}
    </>
  );
}

function Status({ campaign }: { campaign: Campaign }) {
  if (campaign.status !== 'scheduled' || !campaign.scheduledAt) return <>{campaign.status}</>;
  return (
    <>
      scheduled for <When at={campaign.scheduledAt} />
    </>
  );
}

interface Draft {
  name: string;
  title: string;
  body: string;
  iconUrl: string;
  imageUrl: string;
  actionUrl: string;
  segmentId: string;
  /** A datetime-local value (the member's time zone); empty: no schedule. */
  scheduledAt: string;
}

const EMPTY: Draft = { name: '', title: '', body: '', iconUrl: '', imageUrl: '', actionUrl: '', segmentId: '', scheduledAt: '' };

function toRequest(draft: Draft): CreateCampaignRequest {
  const optional = (value: string) => (value.trim() === '' ? null : value.trim());
  return {
    name: draft.name,
    title: draft.title,
    body: draft.body,
    iconUrl: optional(draft.iconUrl),
    imageUrl: optional(draft.imageUrl),
    actionUrl: optional(draft.actionUrl),
    segmentId: optional(draft.segmentId),
    scheduledAt: draft.scheduledAt === '' ? null : new Date(draft.scheduledAt).toISOString(),
  };
}

function Compose() {
  const queryClient = useQueryClient();
  const [draft, setDraft] = useState<Draft>(EMPTY);
  const segments = useQuery({ queryKey: ['segments'], queryFn: () => api<Page<Segment>>('GET', '/segments?limit=100') });
  const create = useMutation({
    mutationFn: async ({ sendNow }: { sendNow: boolean }) => {
      const made = await api<Campaign>('POST', '/campaigns', toRequest(sendNow ? { ...draft, scheduledAt: '' } : draft));
      return sendNow ? api<Campaign>('POST', campaignPath(made.id, '/send')) : made;
    },
    onSuccess: (campaign) => {
      setDraft(EMPTY);
      void queryClient.invalidateQueries({ queryKey: CAMPAIGNS });
      navigate(`/campaigns?campaign=${encodeURIComponent(campaign.id)}`);
    },
  });
  const field = (key: keyof Draft) => ({
    id: `campaign-${key}`,
    value: draft[key],
    onChange: (event: { target: { value: string } }) => setDraft((current) => ({ ...current, [key]: event.target.value })),
  });
  const submit = (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const submitter = (event.nativeEvent as SubmitEvent).submitter;
    create.mutate({ sendNow: submitter?.getAttribute('value') === 'send' });
  };
  return (
    <section aria-labelledby="compose" className="compose">
      <form onSubmit={submit} aria-labelledby="compose">
        <h2 id="compose">New campaign</h2>
        <label htmlFor="campaign-name">Name</label>
        <input {...field('name')} required maxLength={200} />
        <label htmlFor="campaign-title">Title</label>
        <input {...field('title')} required maxLength={256} />
        <label htmlFor="campaign-body">Body</label>
        <textarea {...field('body')} required maxLength={2048} rows={3} />
        <label htmlFor="campaign-iconUrl">Icon URL</label>
        <input {...field('iconUrl')} type="url" />
        <label htmlFor="campaign-imageUrl">Image URL</label>
        <input {...field('imageUrl')} type="url" />
        <label htmlFor="campaign-actionUrl">Opens on click</label>
        <input {...field('actionUrl')} type="url" />
        <label htmlFor="campaign-segmentId">Audience</label>
        <select {...field('segmentId')}>
          <option value="">Every active subscriber</option>
          {(segments.data?.data ?? []).map((segment) => (
            <option key={segment.id} value={segment.id}>
              {segment.name}
            </option>
          ))}
        </select>
        <label htmlFor="campaign-scheduledAt">Send at (optional)</label>
        <input {...field('scheduledAt')} type="datetime-local" aria-describedby="campaign-schedule-help" />
        <p id="campaign-schedule-help" className="help">
          Your local time. Empty: the campaign is saved as a draft.
        </p>
        <ErrorNote error={create.error} />
        <div className="actions">
          <button type="submit" name="intent" value="save" disabled={create.isPending}>
            {draft.scheduledAt === '' ? 'Save draft' : 'Schedule'}
          </button>
          <button type="submit" name="intent" value="send" className="secondary" disabled={create.isPending}>
            Send now
          </button>
        </div>
      </form>
      <NotificationPreview draft={draft} />
    </section>
  );
}

/** The notification as a desktop browser shows it: the site, icon, title, body, large image and where a click goes. */
function NotificationPreview({ draft }: { draft: Pick<Draft, 'title' | 'body' | 'iconUrl' | 'imageUrl' | 'actionUrl'> }) {
  const mayReadSite = useCan()('account', 'GET');
  const site = useQuery({ queryKey: ['site'], queryFn: () => api<Site>('GET', '/site'), enabled: mayReadSite });
  // An address the browser could not load shows as the empty frame (and is named), not a broken image.
  const [unloadable, setUnloadable] = useState<ReadonlySet<string>>(new Set());
  const failed = (url: string) => () => setUnloadable((current) => new Set(current).add(url));
  const picture = (url: string) => /^https?:\/\//.test(url.trim()) && !unloadable.has(url.trim());
  return (
    <section className="preview" aria-labelledby="preview-heading">
      <h2 id="preview-heading">Preview</h2>
      <div className="notification" role="group" aria-label="The notification as a browser shows it" aria-live="polite">
        <div className="notification-head">
          <span className="notification-origin">{site.data?.domain ?? 'your site'}</span>
          <span aria-hidden="true">now</span>
        </div>
        <div className="notification-main">
          {picture(draft.iconUrl) ? (
            <img className="notification-icon" src={draft.iconUrl.trim()} alt="" onError={failed(draft.iconUrl.trim())} />
          ) : (
            <span className="notification-icon placeholder" aria-hidden="true" />
          )}
          <div>
            <p className="notification-title">{draft.title || 'Title'}</p>
            <p className="notification-body">{draft.body || 'The body of the notification.'}</p>
          </div>
        </div>
        {picture(draft.imageUrl) ? <img className="notification-image" src={draft.imageUrl.trim()} alt="The large image" onError={failed(draft.imageUrl.trim())} /> : null}
        {unloadable.size > 0 && [draft.iconUrl, draft.imageUrl].some((url) => unloadable.has(url.trim())) ? (
          <p className="notification-action">The browser could not load {[draft.iconUrl, draft.imageUrl].filter((url) => unloadable.has(url.trim())).join(' or ')}.</p>
        ) : null}
        <p className="notification-action">{draft.actionUrl.trim() ? `A click opens ${draft.actionUrl.trim()}` : 'A click opens your site'}</p>
      </div>
    </section>
  );
}

function CampaignDetail({ id }: { id: string }) {
  const [bucket, setBucket] = useState<Bucket>('minute');
  const campaign = useQuery({ queryKey: [...CAMPAIGNS, id], queryFn: () => api<Campaign>('GET', campaignPath(id)), refetchInterval: LIVE_MS });
  const stats = useQuery({ queryKey: [...CAMPAIGNS, id, 'stats'], queryFn: () => api<CampaignStats>('GET', campaignPath(id, '/stats')), refetchInterval: LIVE_MS });
  const createdAt = campaign.data?.createdAt;
  const series = useQuery({
    queryKey: [...CAMPAIGNS, id, 'series', bucket],
    queryFn: () => api<CampaignStatsSeries>('GET', seriesPath(id, bucket, createdAt)),
    enabled: createdAt !== undefined,
    refetchInterval: LIVE_MS,
  });
  const current = campaign.data;
  return (
    <>
      <DetailHeading back="/campaigns" backLabel="All campaigns" title={current?.name ?? 'Campaign'} focusKey={id} />
      <ErrorNote error={campaign.error} />
      {current ? (
        <>
          <p>
            Status: <strong><Status campaign={current} /></strong>
          </p>
          <div className="actions">
            <MoveButtons campaign={current} />
          </div>
          <NotificationPreview draft={{ title: current.title, body: current.body, iconUrl: current.iconUrl ?? '', imageUrl: current.imageUrl ?? '', actionUrl: current.actionUrl ?? '' }} />
        </>
      ) : null}
      <h2>Stats</h2>
      <ErrorNote error={stats.error} />
      {stats.data ? (
        <dl className="figures">
          <div>
            <dt>Sent</dt>
            <dd>{stats.data.totalSent}</dd>
          </div>
          <div>
            <dt>Delivered</dt>
            <dd>{stats.data.totalDelivered}</dd>
          </div>
          <div>
            <dt>Clicked</dt>
            <dd>{stats.data.totalClicked}</dd>
          </div>
          <div>
            <dt>Delivery rate</dt>
            <dd>{stats.data.deliveryRate}%</dd>
          </div>
          <div>
            <dt>Click rate</dt>
            <dd>{stats.data.clickRate}%</dd>
          </div>
        </dl>
      ) : null}
      <h2>Over time</h2>
      <label htmlFor="series-bucket">Per</label>
      <select id="series-bucket" className="narrow" value={bucket} onChange={(event) => setBucket(event.target.value as typeof bucket)}>
        <option value="minute">minute (the last day at most)</option>
        <option value="hour">hour (the last 60 days at most)</option>
        <option value="day">day</option>
      </select>
      <ErrorNote error={series.error} />
      {series.data ? <StatsChart series={series.data} /> : null}
    </>
  );
}
