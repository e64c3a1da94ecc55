/**
 * Two small self-contained SVG charts, written by hand so the report needs no browser and no plotting
 * package: grouped bars (e.g. DELETEs per pod against replicas) and lines (e.g. a cumulative count
 * over time). Every text is XML-escaped; sizes are in SVG user units (px).
 */

/** One series of a chart: a name, a colour and its values. */
export interface Series {
  name: string;
  color: string;
  /** Bar charts: one value per category. Line charts: `[x, y]` points. */
  values: number[] | [number, number][];
}

const W = 640;
const H = 320;
const M = { top: 40, right: 20, bottom: 50, left: 60 };

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** A "nice" upper bound and tick step for an axis reaching `max`. */
export function niceScale(max: number, ticks = 5): { top: number; step: number } {
  if (!(max > 0)) return { top: 1, step: 0.2 };
  const raw = max / ticks;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  return { top: Math.ceil(max / step) * step, step };
}

function fmt(x: number): string {
  return Number.isInteger(x) ? String(x) : x.toFixed(Math.abs(x) < 1 ? 2 : 1);
}

function frame(
  title: string,
  xLabel: string,
  yLabel: string,
  yTop: number,
  yStep: number,
  body: string[],
): string {
  const ih = H - M.top - M.bottom;
  const y = (v: number) => M.top + ih - (v / yTop) * ih;
  const grid: string[] = [];
  for (let v = 0; v <= yTop + 1e-9; v += yStep) {
    grid.push(
      `<line x1="${M.left}" x2="${W - M.right}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd"/>`,
      `<text x="${M.left - 6}" y="${y(v) + 4}" text-anchor="end">${fmt(v)}</text>`,
    );
  }
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12" role="img" aria-labelledby="title">`,
    `<title id="title">${esc(title)}</title>`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="20" text-anchor="middle" font-size="14" font-weight="bold">${esc(title)}</text>`,
    ...grid,
    `<line x1="${M.left}" x2="${M.left}" y1="${M.top}" y2="${H - M.bottom}" stroke="#333"/>`,
    `<line x1="${M.left}" x2="${W - M.right}" y1="${H - M.bottom}" y2="${H - M.bottom}" stroke="#333"/>`,
    `<text x="${W / 2}" y="${H - 10}" text-anchor="middle">${esc(xLabel)}</text>`,
    `<text transform="translate(14 ${M.top + ih / 2}) rotate(-90)" text-anchor="middle">${esc(yLabel)}</text>`,
    ...body,
    '</svg>',
    '',
  ].join('\n');
}

function legend(series: readonly Series[]): string[] {
  return series.map(
    (s, i) =>
      `<rect x="${M.left + 10 + i * 140}" y="${M.top - 14}" width="10" height="10" fill="${s.color}"/>` +
      `<text x="${M.left + 24 + i * 140}" y="${M.top - 5}">${esc(s.name)}</text>`,
  );
}

/** Grouped bars: one group per category, one bar per series, the value printed above each bar. */
export function barChart(opts: {
  title: string;
  xLabel: string;
  yLabel: string;
  categories: string[];
  series: Series[];
}): string {
  const max = Math.max(0, ...opts.series.flatMap((s) => (s.values as number[]).filter(Number.isFinite)));
  const { top, step } = niceScale(max * 1.1);
  const iw = W - M.left - M.right;
  const ih = H - M.top - M.bottom;
  const groupW = iw / Math.max(1, opts.categories.length);
  const barW = (groupW * 0.7) / Math.max(1, opts.series.length);
  const body: string[] = [];
  opts.categories.forEach((c, ci) => {
    const gx = M.left + ci * groupW + groupW * 0.15;
    body.push(
      `<text x="${M.left + ci * groupW + groupW / 2}" y="${H - M.bottom + 16}" text-anchor="middle">${esc(c)}</text>`,
    );
    opts.series.forEach((s, si) => {
      const v = (s.values as number[])[ci];
      if (v === undefined || !Number.isFinite(v)) return;
      const h = (v / top) * ih;
      const x = gx + si * barW;
      body.push(
        `<rect x="${x.toFixed(1)}" y="${(M.top + ih - h).toFixed(1)}" width="${(barW - 2).toFixed(1)}" height="${h.toFixed(1)}" fill="${s.color}"/>`,
        `<text x="${(x + barW / 2 - 1).toFixed(1)}" y="${(M.top + ih - h - 4).toFixed(1)}" text-anchor="middle" font-size="11">${fmt(v)}</text>`,
      );
    });
  });
  return frame(opts.title, opts.xLabel, opts.yLabel, top, step, [...body, ...legend(opts.series)]);
}

/** Lines through `[x, y]` points on shared linear axes starting at 0. */
export function lineChart(opts: { title: string; xLabel: string; yLabel: string; series: Series[] }): string {
  const pts = opts.series.flatMap((s) => s.values as [number, number][]);
  const xs = niceScale(Math.max(0, ...pts.map((p) => p[0])));
  const ys = niceScale(Math.max(0, ...pts.map((p) => p[1])) * 1.05);
  const iw = W - M.left - M.right;
  const ih = H - M.top - M.bottom;
  const px = (x: number) => M.left + (x / xs.top) * iw;
  const py = (y: number) => M.top + ih - (y / ys.top) * ih;
  const body: string[] = [];
  for (let v = 0; v <= xs.top + 1e-9; v += xs.step) {
    body.push(`<text x="${px(v)}" y="${H - M.bottom + 16}" text-anchor="middle">${fmt(v)}</text>`);
  }
  for (const s of opts.series) {
    const d = (s.values as [number, number][])
      .map(([x, y], i) => `${i ? 'L' : 'M'}${px(x).toFixed(1)} ${py(y).toFixed(1)}`)
      .join(' ');
    body.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2"/>`);
  }
  return frame(opts.title, opts.xLabel, opts.yLabel, ys.top, ys.step, [...body, ...legend(opts.series)]);
}
