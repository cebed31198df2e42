import { type QueryClient, queryOptions, useQuery } from '@tanstack/react-query';
import type { Campaign, Page, SubscriberCounts } from '@herald/sdk';

import { api } from '../api.js';
import { ErrorNote, Table, When } from '../ui.js';

/**
 * Today's sends and the delivery and click rates of the recent campaigns, from the campaign list's
 * counters; the subscribers' counts. Pending questions need an endpoint that lists them (the
 * decisions API answers one question by id), so the page says so instead of guessing.
 */

const RECENT = 20;

const percent = (part: number, whole: number) => (whole === 0 ? '–' : `${((part / whole) * 100).toFixed(1)}%`);

function isToday(at: string | null): boolean {
  return at !== null && new Date(at).toDateString() === new Date().toDateString();
}

const recentCampaigns = queryOptions({ queryKey: ['campaigns', 'recent'], queryFn: () => api<Page<Campaign>>('GET', `/campaigns?limit=${RECENT}`) });
export const subscriberCounts = queryOptions({ queryKey: ['subscribers', 'count'], queryFn: () => api<SubscriberCounts>('GET', '/subscribers/count') });

/** Starts the overview's calls (a cold load of the overview asks for them beside /me). */
export function prefetchOverview(queryClient: QueryClient): void {
  void queryClient.prefetchQuery(recentCampaigns);
  void queryClient.prefetchQuery(subscriberCounts);
}

export function OverviewPage() {
  const campaigns = useQuery(recentCampaigns);
  const subscribers = useQuery(subscriberCounts);
  const recent = campaigns.data?.data ?? [];
  const today = recent.filter((campaign) => isToday(campaign.startedAt));
  const sum = (list: Campaign[], field: 'totalSent' | 'totalDelivered' | 'totalClicked') => list.reduce((total, campaign) => total + campaign[field], 0);

  return (
    <>
      <section aria-labelledby="today">
        <h2 id="today">Today</h2>
        <ErrorNote error={campaigns.error ?? subscribers.error} />
        <dl className="figures">
          <div>
            <dt>Sent today</dt>
            <dd>{campaigns.data ? sum(today, 'totalSent') : '…'}</dd>
          </div>
          <div>
            <dt>Delivery rate</dt>
            <dd>{campaigns.data ? percent(sum(today, 'totalDelivered'), sum(today, 'totalSent')) : '…'}</dd>
          </div>
          <div>
            <dt>Click rate</dt>
            <dd>{campaigns.data ? percent(sum(today, 'totalClicked'), sum(today, 'totalDelivered')) : '…'}</dd>
          </div>
          <div>
            <dt>Active subscribers</dt>
            <dd>{subscribers.data ? subscribers.data.active : '…'}</dd>
          </div>
        </dl>
      </section>
      <section aria-labelledby="recent">
        <h2 id="recent">Recent campaigns</h2>
        {campaigns.data && recent.length === 0 ? <p>No campaign yet.</p> : null}
        {recent.length > 0 ? (
          <Table caption="Recent campaigns" columns={['Campaign', 'Status', 'Started', 'Sent', 'Delivered', 'Clicked', 'Delivery rate', 'Click rate']}>
            {recent.map((campaign) => (
              <tr key={campaign.id}>
                <th scope="row">{campaign.name || campaign.title}</th>
                <td>{campaign.status}</td>
                <td>
                  <When at={campaign.startedAt} never="Not started" />
                </td>
                <td>{campaign.totalSent}</td>
                <td>{campaign.totalDelivered}</td>
                <td>{campaign.totalClicked}</td>
                <td>{percent(campaign.totalDelivered, campaign.totalSent)}</td>
                <td>{percent(campaign.totalClicked, campaign.totalDelivered)}</td>
              </tr>
            ))}
          </Table>
        ) : null}
      </section>
      <section aria-labelledby="questions">
        <h2 id="questions">Pending questions</h2>
        <p>Not shown yet: the API has no endpoint that lists a workspace's pending questions (the Decisions inbox will need one).</p>
      </section>
    </>
  );
}
