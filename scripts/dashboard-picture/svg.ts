// A dashboard as one SVG image, drawn by hand: a grid of panels, each with its title, and either time series
// (a line per label set, y axis in the panel's unit, time axis in UTC), a state timeline (a band per label set,
// coloured by the panel's value mappings) or bars (one value per label set, as a bar gauge shows it), each with
// its legend. Series are given with their points; the caller queries them.

export interface Point {
  /** Seconds since the epoch. */
  readonly t: number;
  /** NaN where Prometheus answered NaN (a quantile of no observations): a gap. */
  readonly v: number;
}

export interface Series {
  readonly name: string;
  readonly points: readonly Point[];
}

export interface StateStyle {
  readonly text: string;
  /** A Grafana colour name (green, orange, red, transparent) or a CSS colour. */
  readonly color: string;
}

export type PanelData =
  | { readonly kind: "timeseries"; readonly title: string; readonly unit?: string; readonly series: readonly Series[] }
  | { readonly kind: "state-timeline"; readonly title: string; readonly series: readonly Series[]; readonly states: Readonly<Record<string, StateStyle>> }
  | { readonly kind: "bars"; readonly title: string; readonly unit?: string; readonly bars: readonly { readonly name: string; readonly value: number }[] };

export interface Picture {
  readonly title: string;
  readonly subtitle: string;
  /** The time range every time axis shows, seconds since the epoch. */
  readonly from: number;
  readonly to: number;
  /** The query step: points further apart than 1.5 steps are not joined. */
  readonly stepSeconds: number;
  readonly columns: number;
  readonly panels: readonly PanelData[];
}

/** Every panel's size, in pixels. */
export const PANEL_WIDTH = 600;
export const PANEL_HEIGHT = 280;
const GAP = 16;
const HEADER = 64;
const TITLE = 30;
const Y_LABELS = 64;
const X_LABELS = 20;
const LEGEND_LINE = 18;
const PAD = 12;

// Grafana's dark theme and its classic palette.
const BACKGROUND = "#111217";
const PANEL_FILL = "#181b1f";
const BORDER = "#2c3235";
const GRID = "#2c3235";
const TEXT = "#ccccdc";
const MUTED = "#8e8e8e";
const PALETTE = [
  "#7EB26D", "#EAB839", "#6ED0E0", "#EF843C", "#E24D42", "#1F78C1", "#BA43A9", "#705DA0", "#508642", "#CCA300",
  "#447EBC", "#C15C17", "#890F02", "#0A437C", "#6D1F62", "#584477", "#B7DBAB", "#F4D598", "#70DBED", "#F9BA8F",
];
const NAMED_COLORS: Readonly<Record<string, string>> = { green: "#73BF69", orange: "#FF9830", red: "#F2495C", yellow: "#FADE2A", blue: "#5794F2" };

export function escapeXml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;" })[c] ?? c);
}

const r = (n: number): string => String(Math.round(n * 10) / 10);

function number(v: number): string {
  if (v === 0) return "0";
  if (Math.abs(v) >= 100) return String(Math.round(v));
  return String(Number(v.toPrecision(3)));
}

function si(v: number, symbol: string): string {
  const prefixes: readonly [number, string][] = [[1e6, "M"], [1e3, "k"], [1, ""], [1e-3, "m"]];
  const [scale, prefix] = prefixes.find(([s]) => Math.abs(v) >= s) ?? [1e-3, "m"];
  return v === 0 ? `0 ${symbol}` : `${number(v / scale)} ${prefix}${symbol}`;
}

/** A value in one of Grafana's units (those the drawn panels use); throws on another. */
export function formatValue(v: number, unit: string | undefined): string {
  switch (unit) {
    case undefined:
    case "none":
    case "short":
      return number(v);
    case "watt":
      return si(v, "W");
    case "kwatth":
      return si(v * 1000, "Wh");
    case "h":
      if (Math.abs(v) >= 1 || v === 0) return `${number(v)} h`;
      return Math.abs(v) * 60 >= 1 ? `${number(v * 60)} min` : `${number(v * 3600)} s`;
    case "s":
      if (Math.abs(v) >= 60) return `${number(v / 60)} min`;
      return Math.abs(v) >= 1 || v === 0 ? `${number(v)} s` : `${number(v * 1000)} ms`;
    case "ops":
      return `${number(v)} ops/s`;
    default:
      throw new Error(`unit "${unit}" is not drawn`);
  }
}

/** A step of 1, 2, 2.5 or 5 times a power of ten that splits `span` into at most `count` parts. */
function niceStep(span: number, count: number): number {
  const raw = span / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  return ([1, 2, 2.5, 5, 10].find((m) => m * power >= raw) ?? 10) * power;
}

const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21_600, 43_200, 86_400];

function timeLabel(t: number, step: number): string {
  const iso = new Date(t * 1000).toISOString();
  return step >= 60 ? iso.slice(11, 16) : iso.slice(11, 19);
}

interface Box {
  readonly x: number;
  readonly y: number;
  readonly width: number;
  readonly height: number;
}

/** The time axis under `box`: ticks at whole multiples of a step, at least 80 px apart, labelled in UTC. */
function timeAxis(box: Box, from: number, to: number): string[] {
  const step = TIME_STEPS.find((s) => ((to - from) / s) * 80 <= box.width) ?? 86_400;
  const out: string[] = [];
  for (let t = Math.ceil(from / step) * step; t <= to; t += step) {
    const x = box.x + ((t - from) / (to - from)) * box.width;
    out.push(`<line x1="${r(x)}" y1="${r(box.y)}" x2="${r(x)}" y2="${r(box.y + box.height)}" stroke="${GRID}" stroke-width="1"/>`);
    out.push(`<text class="time" x="${r(x)}" y="${r(box.y + box.height + 14)}" text-anchor="middle" fill="${MUTED}" font-size="11">${timeLabel(t, step)}</text>`);
  }
  return out;
}

/** Legend entries wrapped into lines of the panel's width; returns the SVG and the lines used. */
function legend(entries: readonly { name: string; color: string }[], x: number, y: number, width: number, bottomUp: boolean): { svg: string[]; lines: number } {
  const rows: { name: string; color: string; x: number }[][] = [[]];
  let at = 0;
  for (const e of entries) {
    const w = 22 + e.name.length * 6.6;
    if (at > 0 && at + w > width) {
      rows.push([]);
      at = 0;
    }
    rows[rows.length - 1]?.push({ ...e, x: at });
    at += w + 12;
  }
  const top = bottomUp ? y - rows.length * LEGEND_LINE : y;
  const svg = rows.flatMap((row, i) => row.flatMap((e) => {
    const ly = top + i * LEGEND_LINE + LEGEND_LINE / 2;
    return [
      `<rect x="${r(x + e.x)}" y="${r(ly - 2)}" width="14" height="4" rx="1" fill="${e.color}"/>`,
      `<text class="legend" x="${r(x + e.x + 20)}" y="${r(ly + 4)}" fill="${TEXT}" font-size="11">${escapeXml(e.name)}</text>`,
    ];
  }));
  return { svg, lines: rows.length };
}

/** The runs of finite, evenly sampled points of a series: a NaN or a gap of over 1.5 steps ends a run. */
function runs(points: readonly Point[], stepSeconds: number): Point[][] {
  const out: Point[][] = [];
  let current: Point[] = [];
  let last: Point | undefined;
  for (const p of [...points].sort((a, b) => a.t - b.t)) {
    if (!Number.isFinite(p.v) || (last !== undefined && p.t - last.t > 1.5 * stepSeconds)) {
      if (current.length > 0) out.push(current);
      current = [];
    }
    if (Number.isFinite(p.v)) current.push(p);
    last = p;
  }
  if (current.length > 0) out.push(current);
  return out;
}

function timeseries(panel: Extract<PanelData, { kind: "timeseries" }>, inner: Box, picture: Picture): string[] {
  const colors = panel.series.map((_, i) => PALETTE[i % PALETTE.length] ?? TEXT);
  const key = legend(panel.series.map((s, i) => ({ name: s.name, color: colors[i] ?? TEXT })), inner.x, inner.y + inner.height, inner.width, true);
  const plot: Box = {
    x: inner.x + Y_LABELS,
    y: inner.y,
    width: inner.width - Y_LABELS,
    height: inner.height - X_LABELS - key.lines * LEGEND_LINE - 4,
  };
  const values = panel.series.flatMap((s) => s.points.map((p) => p.v)).filter((v) => Number.isFinite(v));
  const low = Math.min(0, ...values);
  const high = Math.max(...values, low);
  const step = niceStep(high > low ? high - low : 1, 4);
  const min = Math.floor(low / step) * step;
  const max = Math.max(Math.ceil(high / step) * step, min + step);
  const x = (t: number): number => plot.x + ((t - picture.from) / (picture.to - picture.from)) * plot.width;
  const y = (v: number): number => plot.y + plot.height - ((v - min) / (max - min)) * plot.height;
  const out = [`<rect class="plot" x="${r(plot.x)}" y="${r(plot.y)}" width="${r(plot.width)}" height="${r(plot.height)}" fill="none"/>`];
  for (let v = min; v <= max + step / 1000; v += step) {
    out.push(`<line x1="${r(plot.x)}" y1="${r(y(v))}" x2="${r(plot.x + plot.width)}" y2="${r(y(v))}" stroke="${GRID}" stroke-width="1"/>`);
    out.push(`<text class="value" x="${r(plot.x - 6)}" y="${r(y(v) + 4)}" text-anchor="end" fill="${MUTED}" font-size="11">${escapeXml(formatValue(v, panel.unit))}</text>`);
  }
  out.push(...timeAxis(plot, picture.from, picture.to));
  panel.series.forEach((s, i) => {
    const d = runs(s.points, picture.stepSeconds)
      .map((run) => run.map((p, j) => `${j === 0 ? "M" : "L"}${r(x(p.t))} ${r(y(p.v))}`).join(" "))
      .join(" ");
    out.push(`<path class="series" data-series="${escapeXml(s.name)}" d="${d}" fill="none" stroke="${colors[i] ?? TEXT}" stroke-width="1.5" stroke-linejoin="round"/>`);
  });
  return [...out, ...key.svg];
}

function stateTimeline(panel: Extract<PanelData, { kind: "state-timeline" }>, inner: Box, picture: Picture): string[] {
  const styles = Object.entries(panel.states).map(([value, style]) => ({ value, ...style }));
  const key = legend(styles.map((s) => ({ name: s.text, color: NAMED_COLORS[s.color] ?? (s.color === "transparent" ? BORDER : s.color) })),
    inner.x, inner.y + inner.height, inner.width, true);
  const plot: Box = { x: inner.x + Y_LABELS, y: inner.y, width: inner.width - Y_LABELS, height: inner.height - X_LABELS - key.lines * LEGEND_LINE - 4 };
  const x = (t: number): number => plot.x + ((Math.min(Math.max(t, picture.from), picture.to) - picture.from) / (picture.to - picture.from)) * plot.width;
  const out = [`<rect class="plot" x="${r(plot.x)}" y="${r(plot.y)}" width="${r(plot.width)}" height="${r(plot.height)}" fill="none"/>`];
  out.push(...timeAxis(plot, picture.from, picture.to));
  const band = plot.height / Math.max(panel.series.length, 1);
  panel.series.forEach((s, i) => {
    const top = plot.y + i * band + 3;
    const height = band - 6;
    out.push(`<text class="legend" x="${r(plot.x - 6)}" y="${r(top + height / 2 + 4)}" text-anchor="end" fill="${TEXT}" font-size="11">${escapeXml(s.name)}</text>`);
    for (const run of runs(s.points, picture.stepSeconds)) {
      // Consecutive points of one value make one band, to the next point (or one step past the last).
      let start = 0;
      run.forEach((p, j) => {
        const next = run[j + 1];
        if (next !== undefined && next.v === p.v) return;
        const first = run[start] ?? p;
        start = j + 1;
        const style = panel.states[String(p.v)];
        const fill = style === undefined ? MUTED : (NAMED_COLORS[style.color] ?? style.color);
        if (fill === "transparent") return;
        const x0 = x(first.t);
        const x1 = x(next?.t ?? p.t + picture.stepSeconds);
        out.push(`<rect class="state" data-series="${escapeXml(s.name)}" x="${r(x0)}" y="${r(top)}" width="${r(Math.max(x1 - x0, 1))}" height="${r(height)}" fill="${fill}" fill-opacity="0.85"/>`);
      });
    }
  });
  return [...out, ...key.svg];
}

function bars(panel: Extract<PanelData, { kind: "bars" }>, inner: Box): string[] {
  const max = Math.max(...panel.bars.map((b) => b.value), 0) || 1;
  const row = Math.min(36, (inner.height - 8) / Math.max(panel.bars.length, 1));
  const labelWidth = 96;
  const valueWidth = 80;
  const track = inner.width - labelWidth - valueWidth;
  return panel.bars.flatMap((b, i) => {
    const top = inner.y + i * row + 4;
    const width = (Math.max(b.value, 0) / max) * track;
    const color = PALETTE[i % PALETTE.length] ?? TEXT;
    return [
      `<text class="legend" x="${r(inner.x)}" y="${r(top + row / 2 + 2)}" fill="${TEXT}" font-size="12">${escapeXml(b.name)}</text>`,
      `<rect x="${r(inner.x + labelWidth)}" y="${r(top + 4)}" width="${r(track)}" height="${r(row - 12)}" fill="${BORDER}" fill-opacity="0.5"/>`,
      `<rect class="bar" data-series="${escapeXml(b.name)}" x="${r(inner.x + labelWidth)}" y="${r(top + 4)}" width="${r(width)}" height="${r(row - 12)}" fill="${color}"/>`,
      `<text class="value" x="${r(inner.x + inner.width)}" y="${r(top + row / 2 + 2)}" text-anchor="end" fill="${color}" font-size="13" font-weight="600">${escapeXml(formatValue(b.value, panel.unit))}</text>`,
    ];
  });
}

/** The whole picture: panels left to right, `columns` to a row, under the title. */
export function renderDashboard(picture: Picture): string {
  if (!(picture.to > picture.from)) throw new Error("the time range is empty");
  const rows = Math.ceil(picture.panels.length / picture.columns);
  const width = GAP + picture.columns * (PANEL_WIDTH + GAP);
  const height = HEADER + rows * (PANEL_HEIGHT + GAP);
  const body = picture.panels.flatMap((panel, i) => {
    const box: Box = {
      x: GAP + (i % picture.columns) * (PANEL_WIDTH + GAP),
      y: HEADER + Math.floor(i / picture.columns) * (PANEL_HEIGHT + GAP),
      width: PANEL_WIDTH,
      height: PANEL_HEIGHT,
    };
    const inner: Box = { x: box.x + PAD, y: box.y + TITLE, width: box.width - 2 * PAD, height: box.height - TITLE - PAD / 2 };
    const content = panel.kind === "timeseries" ? timeseries(panel, inner, picture)
      : panel.kind === "state-timeline" ? stateTimeline(panel, inner, picture)
        : bars(panel, inner);
    return [
      `<g class="panel" data-title="${escapeXml(panel.title)}">`,
      `<rect x="${box.x}" y="${box.y}" width="${box.width}" height="${box.height}" rx="3" fill="${PANEL_FILL}" stroke="${BORDER}"/>`,
      `<text class="title" x="${box.x + PAD}" y="${box.y + 20}" fill="${TEXT}" font-size="13" font-weight="600">${escapeXml(panel.title)}</text>`,
      ...content,
      "</g>",
    ];
  });
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Inter, Helvetica, Arial, sans-serif">`,
    `<rect width="${width}" height="${height}" fill="${BACKGROUND}"/>`,
    `<text x="${GAP}" y="28" fill="${TEXT}" font-size="18" font-weight="600">${escapeXml(picture.title)}</text>`,
    `<text x="${GAP}" y="48" fill="${MUTED}" font-size="12">${escapeXml(picture.subtitle)}</text>`,
    ...body,
    "</svg>",
    "",
  ].join("\n");
}
