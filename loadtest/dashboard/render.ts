// The dashboard's layout drawn as one HTML page of plain SVG charts: Grafana's 24-column grid (each
// panel at its gridPos), a row panel as a heading, each timeseries panel a line per series with its
// legend (the target's legendFormat) and its axis in the panel's unit.
import type { Series } from './prometheus.js';

export interface Panel {
  type: string;
  title: string;
  gridPos: { h: number; w: number; x: number; y: number };
  fieldConfig?: { defaults?: { unit?: string } };
  targets?: Array<{ expr: string; legendFormat?: string }>;
}

/** A drawn panel: each target's series, in target order. */
export interface PanelData {
  panel: Panel;
  series: Array<{ legend: string; values: Array<[number, number]> }>;
}

const COLUMN_PX = 60;
const ROW_PX = 34;
const COLORS = ['#73bf69', '#f2cc0c', '#8ab8ff', '#ff780a', '#f2495c', '#5794f2', '#b877d9', '#fade2a', '#37872d', '#c4162a', '#1f60c4', '#8f3bb8'];

const escape = (text: string): string => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** Grafana's legendFormat: {{label}} replaced by the series' value of it. */
export function legendOf(format: string | undefined, metric: Record<string, string>): string {
  if (!format) return JSON.stringify(metric);
  return format.replace(/\{\{\s*(\w+)\s*\}\}/g, (_, name: string) => metric[name] ?? '');
}

function formatValue(value: number, unit: string | undefined): string {
  const trim = (n: number): string => (Math.abs(n) >= 100 ? n.toFixed(0) : Math.abs(n) >= 10 ? n.toFixed(1) : Number(n.toFixed(2)).toString());
  switch (unit) {
    case 'percentunit':
      return `${trim(value * 100)}%`;
    case 's':
      return value !== 0 && Math.abs(value) < 1 ? `${trim(value * 1_000)} ms` : `${trim(value)} s`;
    case 'bytes':
      return value >= 2 ** 20 ? `${trim(value / 2 ** 20)} MiB` : value >= 1_024 ? `${trim(value / 1_024)} KiB` : `${trim(value)} B`;
    case 'reqps':
      return `${trim(value)} req/s`;
    default:
      return value >= 1_000_000 ? `${trim(value / 1_000_000)}M` : value >= 1_000 ? `${trim(value / 1_000)}K` : trim(value);
  }
}

function chart(data: PanelData, width: number, height: number, from: number, to: number): string {
  const unit = data.panel.fieldConfig?.defaults?.unit;
  const finite = data.series.flatMap((series) => series.values.map(([, value]) => value)).filter(Number.isFinite);
  const max = Math.max(0, ...finite);
  const min = Math.min(0, ...finite);
  const top = max === min ? min + 1 : max + (max - min) * 0.08;
  const left = 64;
  const right = 8;
  const plotTop = 6;
  const plotHeight = height - 24;
  const x = (at: number): number => left + ((at - from) / Math.max(1, to - from)) * (width - left - right);
  const y = (value: number): number => plotTop + (1 - (value - min) / (top - min)) * plotHeight;
  const parts: string[] = [];
  for (let tick = 0; tick <= 4; tick += 1) {
    const value = min + ((top - min) * tick) / 4;
    parts.push(`<line x1="${left}" x2="${width - right}" y1="${y(value)}" y2="${y(value)}" stroke="#2c3235"/>`);
    parts.push(`<text x="${left - 6}" y="${y(value) + 4}" text-anchor="end">${escape(formatValue(value, unit))}</text>`);
  }
  for (let tick = 0; tick <= 4; tick += 1) {
    const at = from + ((to - from) * tick) / 4;
    parts.push(`<text x="${x(at)}" y="${height - 4}" text-anchor="${tick === 0 ? 'start' : tick === 4 ? 'end' : 'middle'}">${new Date(at * 1_000).toISOString().slice(11, 19)}</text>`);
  }
  data.series.forEach((series, index) => {
    // A gap where the value is NaN (a quantile with nothing in its window), as Grafana leaves one.
    let path = '';
    let drawing = false;
    for (const [at, value] of series.values) {
      if (!Number.isFinite(value)) {
        drawing = false;
        continue;
      }
      path += `${drawing ? 'L' : 'M'}${x(at).toFixed(1)},${y(value).toFixed(1)}`;
      drawing = true;
    }
    const color = COLORS[index % COLORS.length] as string;
    parts.push(`<path d="${path}" fill="none" stroke="${color}" stroke-width="1.6"/>`);
    // A lone point (one finite value between gaps) would not show as a path.
    for (let point = 0; point < series.values.length; point += 1) {
      const [at, value] = series.values[point] as [number, number];
      const before = series.values[point - 1]?.[1];
      const after = series.values[point + 1]?.[1];
      if (Number.isFinite(value) && !Number.isFinite(before ?? NaN) && !Number.isFinite(after ?? NaN)) parts.push(`<circle cx="${x(at)}" cy="${y(value)}" r="2.2" fill="${color}"/>`);
    }
  });
  return `<svg width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">${parts.join('')}</svg>`;
}

export function renderPage(title: string, caption: string, panels: readonly PanelData[], from: number, to: number): string {
  const bottom = Math.max(...panels.map(({ panel }) => panel.gridPos.y + panel.gridPos.h));
  const boxes = panels.map((data) => {
    const { x, y, w, h } = data.panel.gridPos;
    const style = `left:${x * COLUMN_PX}px;top:${y * ROW_PX}px;width:${w * COLUMN_PX - 8}px;height:${h * ROW_PX - 8}px`;
    if (data.panel.type === 'row') return `<div class="row" style="${style}">${escape(data.panel.title)}</div>`;
    const legendLines = Math.ceil(data.series.length / Math.max(1, Math.floor((w * COLUMN_PX) / 190)));
    const chartHeight = h * ROW_PX - 8 - 30 - Math.min(3, legendLines) * 16;
    const legend = data.series
      .map((series, index) => `<span><i style="background:${COLORS[index % COLORS.length]}"></i>${escape(series.legend)}</span>`)
      .join('');
    return `<div class="panel" style="${style}"><h3>${escape(data.panel.title)}</h3>${chart(data, w * COLUMN_PX - 16, chartHeight, from, to)}<div class="legend">${legend}</div></div>`;
  });
  return `<!doctype html><html><head><meta charset="utf-8"><style>
body{margin:0;background:#111217;color:#ccccdc;font:12px/1.3 "DejaVu Sans",sans-serif}
header{padding:12px 16px 4px}header h1{font-size:18px;margin:0 0 4px;color:#fff}header p{margin:0;color:#8e8e9e}
main{position:relative;margin:8px 12px;width:${24 * COLUMN_PX}px;height:${bottom * ROW_PX}px}
.panel{position:absolute;box-sizing:border-box;background:#181b1f;border:1px solid #2c3235;border-radius:3px;padding:4px 4px 2px;overflow:hidden}
.panel h3{margin:0 0 4px 4px;font-size:13px;color:#fff;font-weight:500}
.row{position:absolute;font-size:15px;color:#fff;padding-top:10px}
svg text{fill:#8e8e9e;font-size:10px}
.legend{display:flex;flex-wrap:wrap;gap:2px 12px;padding:0 4px;max-height:48px;overflow:hidden}
.legend span{white-space:nowrap}.legend i{display:inline-block;width:12px;height:3px;margin:0 4px 3px 0;vertical-align:middle}
</style></head><body><header><h1>${escape(title)}</h1><p>${escape(caption)}</p></header><main>${boxes.join('')}</main></body></html>`;
}
