import type { CampaignStatsSeries } from '@herald/sdk';
import { useId } from 'react';

import { Table } from '../ui.js';

/**
 * A campaign's counts over time as an SVG line chart of our own (a few hundred bytes of code: a
 * chart library would cost tens of KB of the initial JS for four lines), with the same numbers as a
 * table beside it for screen readers and for reading exact values.
 */

type Bucket = CampaignStatsSeries['data'][number];
type Counter = 'sent' | 'delivered' | 'clicked' | 'dismissed';

export const SERIES: ReadonlyArray<{ key: Counter; label: string; className: string }> = [
  { key: 'sent', label: 'Sent', className: 'line-sent' },
  { key: 'delivered', label: 'Delivered', className: 'line-delivered' },
  { key: 'clicked', label: 'Clicked', className: 'line-clicked' },
  { key: 'dismissed', label: 'Dismissed', className: 'line-dismissed' },
];

const WIDTH = 720;
const HEIGHT = 240;
const PAD = { left: 44, right: 12, top: 12, bottom: 28 };
/** Up to this many buckets each point is marked too (a single bucket draws no line). */
const MARKED = 120;

const timeFormat = (bucket: string) =>
  new Intl.DateTimeFormat(undefined, bucket === 'day' ? { dateStyle: 'medium' } : { hour: '2-digit', minute: '2-digit', ...(bucket === 'hour' ? { day: 'numeric', month: 'short' } : {}) });

export function StatsChart({ series }: { series: CampaignStatsSeries }) {
  const titleId = useId();
  const descId = useId();
  const data = series.data;
  const format = timeFormat(series.bucket);
  const totals = Object.fromEntries(SERIES.map(({ key }) => [key, data.reduce((sum, bucket) => sum + bucket[key], 0)])) as Record<Counter, number>;
  const top = Math.max(1, ...data.flatMap((bucket) => SERIES.map(({ key }) => bucket[key])));
  const plotWidth = WIDTH - PAD.left - PAD.right;
  const plotHeight = HEIGHT - PAD.top - PAD.bottom;
  const x = (index: number) => PAD.left + (data.length <= 1 ? plotWidth / 2 : (index / (data.length - 1)) * plotWidth);
  const y = (value: number) => PAD.top + plotHeight - (value / top) * plotHeight;
  const points = (key: Counter) => data.map((bucket, index) => `${x(index).toFixed(1)},${y(bucket[key]).toFixed(1)}`).join(' ');
  // Every count up to 5; else the bottom, the middle and the top.
  const ticks = top <= 5 ? Array.from({ length: top + 1 }, (_, value) => value) : [0, Math.round(top / 2), top];
  const labelled = data.length <= 1 ? [0] : [0, Math.floor((data.length - 1) / 2), data.length - 1];
  const summary = SERIES.map(({ key, label }) => `${label} ${totals[key]}`).join(', ');

  return (
    <figure className="chart">
      <svg viewBox={`0 0 ${WIDTH} ${HEIGHT}`} role="img" aria-labelledby={`${titleId} ${descId}`}>
        <title id={titleId}>Counts per {series.bucket}</title>
        <desc id={descId}>
          {data.length} buckets from {format.format(new Date(series.start))}: {summary}.
        </desc>
        {ticks.map((value) => (
          <g key={value}>
            <line className="grid" x1={PAD.left} x2={WIDTH - PAD.right} y1={y(value)} y2={y(value)} />
            <text className="tick" x={PAD.left - 6} y={y(value) + 4} textAnchor="end">
              {value}
            </text>
          </g>
        ))}
        {labelled.map((index) => (
          <text key={index} className="tick" x={x(index)} y={HEIGHT - 8} textAnchor={index === 0 ? 'start' : index === data.length - 1 ? 'end' : 'middle'}>
            {data[index] ? format.format(new Date(data[index].at)) : ''}
          </text>
        ))}
        {SERIES.map(({ key, className }) => (
          <g key={key} className={className}>
            <polyline className="line" points={points(key)} data-series={key} />
            {data.length <= MARKED ? data.map((bucket, index) => <circle key={bucket.at} className="point" cx={x(index)} cy={y(bucket[key])} r={3.5} />) : null}
          </g>
        ))}
      </svg>
      <figcaption>
        <ul className="legend" aria-label="Totals in this window">
          {SERIES.map(({ key, label, className }) => (
            <li key={key} data-series={key}>
              <span className={`swatch ${className}`} aria-hidden="true" />
              {label} <strong>{totals[key]}</strong>
            </li>
          ))}
        </ul>
      </figcaption>
      <details>
        <summary>The numbers as a table</summary>
        <SeriesTable data={data} format={format} />
      </details>
    </figure>
  );
}

function SeriesTable({ data, format }: { data: Bucket[]; format: Intl.DateTimeFormat }) {
  const shown = data.filter((bucket) => SERIES.some(({ key }) => bucket[key] > 0));
  if (shown.length === 0) return <p>Nothing counted in this window yet.</p>;
  return (
    <Table caption="Counts per bucket (buckets with no count left out)" columns={['Starting', ...SERIES.map(({ label }) => label)]}>
      {shown.map((bucket) => (
        <tr key={bucket.at}>
          <th scope="row">
            <time dateTime={bucket.at}>{format.format(new Date(bucket.at))}</time>
          </th>
          {SERIES.map(({ key }) => (
            <td key={key}>{bucket[key]}</td>
          ))}
        </tr>
      ))}
    </Table>
  );
}
