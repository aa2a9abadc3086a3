// `plugpool report`: per machine, hours powered on, kWh used and kWh avoided, from a running plugpool's
// /metrics (its counters since it started) or from Prometheus (increase() of those counters over a window).
import { errorCode } from "../adapters/http-device/device-failure.ts";
import { createHttpClient, describeOrigin, readAnswer, type HttpAnswer } from "../adapters/http-device/http-client.ts";
import { messageOf } from "../domain/errors.ts";
import { renderTable } from "./table.ts";

/** The counters the report reads, and what each row shows of them. */
const ON = "plugpool_machine_powered_on_seconds_total";
const USED = "plugpool_machine_energy_used_kwh_total";
const AVOIDED = "plugpool_machine_energy_avoided_kwh_total";
const STARTED = "plugpool_process_start_time_seconds";

export type ReportSource = { readonly kind: "metrics"; readonly url: string } | { readonly kind: "prometheus"; readonly url: string };

export interface ReportOptions {
  readonly source: ReportSource;
  readonly windowMs: number;
  /** Each request's timeout. */
  readonly timeoutMs?: number;
  /** Epoch ms; for how long a running plugpool's counters have run. */
  readonly now?: () => number;
}

/** One machine's figures; absent where the source has none (no power sensor, no idleWatts). */
export interface MachineFigures {
  readonly group: string;
  readonly machine: string;
  readonly hoursOn?: number;
  readonly kwhUsed?: number;
  readonly kwhAvoided?: number;
}

export interface EnergyReport {
  readonly rows: readonly MachineFigures[];
  /** What span the figures cover, in words. */
  readonly covers: string;
  readonly text: string;
}

/** The source could not be read or answered something other than figures. */
export class ReportError extends Error {
  override readonly name = "ReportError";
}

export async function energyReport(options: ReportOptions): Promise<EnergyReport> {
  const { source } = options;
  const timeoutMs = options.timeoutMs ?? 5000;
  const address = endpoint(source);
  const { values, covers } =
    source.kind === "metrics"
      ? await fromMetrics(address, options.windowMs, timeoutMs, options.now ?? Date.now)
      : await fromPrometheus(address, options.windowMs, timeoutMs, (options.now ?? Date.now)());
  const rows = figures(values);
  return { rows, covers, text: render(rows, covers) };
}

type Values = Map<string, Map<string, number>>;

/** Series of the three counters by metric name, keyed by group and machine. */
function figures(values: Values): MachineFigures[] {
  const keys = new Set([...values.values()].flatMap((byMachine) => [...byMachine.keys()]));
  return [...keys]
    .map((key) => {
      const [group = "", machine = ""] = key.split("\n");
      const on = values.get(ON)?.get(key);
      const used = values.get(USED)?.get(key);
      const avoided = values.get(AVOIDED)?.get(key);
      return {
        group,
        machine,
        ...(on !== undefined && { hoursOn: on / 3600 }),
        ...(used !== undefined && { kwhUsed: used }),
        ...(avoided !== undefined && { kwhAvoided: avoided }),
      };
    })
    .toSorted((a, b) => a.group.localeCompare(b.group) || a.machine.localeCompare(b.machine));
}

/** A source's address, parsed once. */
interface Endpoint {
  /** Without credentials. */
  readonly url: URL;
  /** The address for messages: as given, less any credentials. */
  readonly shown: string;
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * fetch() refuses a URL with credentials (https://fetch.spec.whatwg.org/#dom-request), so a user name and
 * password in the address go as Basic authentication, as curl sends them, and into no message.
 */
function endpoint(source: ReportSource): Endpoint {
  const url = URL.parse(source.url);
  if (url === null || (url.protocol !== "http:" && url.protocol !== "https:")) {
    // Not quoted: in what does not parse, the credentials cannot be told from the rest.
    throw new ReportError(`${source.kind === "metrics" ? "plugpool's metrics address" : "the Prometheus address"} is not an http:// or https:// URL`);
  }
  if (url.username === "" && url.password === "") return { url, shown: source.url, headers: {} };
  const credentials = `${decoded(url.username)}:${decoded(url.password)}`;
  url.username = "";
  url.password = "";
  return { url, shown: url.href, headers: { authorization: `Basic ${Buffer.from(credentials, "utf8").toString("base64")}` } };
}

/** A URL's percent-encoded user name or password as typed; kept encoded where it is no valid encoding. */
function decoded(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}

/**
 * The most of an answer that is read. A plugpool's /metrics, or Prometheus's answer for a few series per
 * machine, is far smaller; more is some other page, and not worth the memory.
 */
const MAX_ANSWER_BYTES = 16 * 1024 * 1024;

/**
 * The status and whole body of a GET, within the timeout (which runs on while the body arrives) and
 * MAX_ANSWER_BYTES. `what` names the request in an error (the address as shown, not the query).
 */
async function get(url: URL, headers: Endpoint["headers"], timeoutMs: number, what: string): Promise<{ status: number; text: string }> {
  describeOrigin(url, { maxBytes: MAX_ANSWER_BYTES });
  const signal = AbortSignal.timeout(timeoutMs);
  let status: number | undefined;
  let answer: HttpAnswer | undefined;
  try {
    const response = await createHttpClient().get(url, { headers, signal });
    status = response.status;
    answer = await readAnswer(response, MAX_ANSWER_BYTES);
  } catch (e) {
    if (errorCode(e) !== "UND_ERR_RES_EXCEEDED_MAX_SIZE") {
      const late = status === undefined ? `no answer within ${timeoutMs} ms` : `the answer did not arrive whole within ${timeoutMs} ms`;
      throw new ReportError(`${what}: ${isTimeout(e) ? late : causeOf(e)}`);
    }
  }
  if (answer === undefined) {
    throw new ReportError(`${what}: ${status === undefined ? "an answer" : `HTTP ${status} with an answer`} of more than ${MAX_ANSWER_BYTES} bytes`);
  }
  return { status: answer.status, text: answer.text };
}

function isTimeout(e: unknown): boolean {
  return e instanceof Error && e.name === "TimeoutError";
}

/** The innermost cause's message: the network's own words ("connect ECONNREFUSED …"), under ky's and fetch's. */
function causeOf(e: unknown): string {
  let inner = e;
  while (inner instanceof Error && inner.cause instanceof Error) inner = inner.cause;
  return messageOf(inner);
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** A running plugpool's counters, since it started (one scrape holds nothing older). */
async function fromMetrics(address: Endpoint, windowMs: number, timeoutMs: number, now: () => number): Promise<{ values: Values; covers: string }> {
  const url = address.shown;
  const { status, text } = await get(address.url, address.headers, timeoutMs, `reading plugpool's metrics at ${url}`);
  if (status < 200 || status > 299) throw new ReportError(`reading plugpool's metrics at ${url}: HTTP ${status}`);
  const values: Values = new Map();
  let started: number | undefined;
  for (const line of text.split("\n")) {
    const m = SAMPLE.exec(line);
    if (m === null) continue;
    const [, name = "", labels = "", raw = ""] = m;
    const value = Number(raw);
    if (name === STARTED) started = value * 1000;
    if (![ON, USED, AVOIDED].includes(name) || !Number.isFinite(value)) continue;
    const l = Object.fromEntries([...labels.matchAll(LABEL)].map(([, k = "", v = ""]) => [k, unescape(v)]));
    put(values, name, l.group ?? "", l.machine ?? "", value);
  }
  if (!text.includes(`# TYPE ${ON} `)) {
    throw new ReportError(`reading plugpool's metrics at ${url}: no ${ON} there; is this a plugpool of this version?`);
  }
  if (started === undefined) return { values, covers: `since the plugpool at ${url} started` };
  const ranMs = now() - started;
  const ran = `since the plugpool at ${url} started ${formatSpan(ranMs)} ago`;
  return {
    values,
    covers:
      ranMs <= windowMs
        ? `${ran} (less than the ${formatSpan(windowMs)} asked for)`
        : `${ran}: a running plugpool's counters cover its whole run, not just the last ${formatSpan(windowMs)}; use --prometheus for a window`,
  };
}

function unescape(value: string): string {
  return value.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
}

function put(values: Values, name: string, group: string, machine: string, value: number): void {
  const byMachine = values.get(name) ?? new Map<string, number>();
  values.set(name, byMachine);
  byMachine.set(`${group}\n${machine}`, (byMachine.get(`${group}\n${machine}`) ?? 0) + value);
}

type JsonObject = Readonly<Record<string, unknown>>;

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

interface Sample {
  readonly metric: JsonObject;
  readonly value: readonly unknown[];
}

function isSample(value: unknown): value is Sample {
  return isObject(value) && isObject(value.metric) && Array.isArray(value.value);
}

/**
 * The samples of an instant query's answer from Prometheus's HTTP API (/api/v1/query): `{"status": "success",
 * "data": {"resultType": "vector", "result": [{"metric": {...}, "value": [time, "value"]}, ...]}}`, see
 * https://prometheus.io/docs/prometheus/latest/querying/api/#instant-queries. Anything else, even well-formed
 * JSON, is a ReportError saying so.
 */
function samplesOf(text: string, status: number, where: string, query: string): readonly Sample[] {
  let answer: unknown;
  try {
    answer = JSON.parse(text);
  } catch {
    // Told below, like JSON of another shape.
  }
  if (!isObject(answer)) throw new ReportError(`${where}: HTTP ${status}, not a Prometheus API answer`);
  if (answer.status !== "success") {
    const type = typeof answer.errorType === "string" ? answer.errorType : `HTTP ${status}`;
    throw new ReportError(`${where} for ${query}: ${type}: ${typeof answer.error === "string" ? answer.error : "no reason given"}`);
  }
  const data = isObject(answer.data) ? answer.data : {};
  if (data.resultType !== "vector") {
    throw new ReportError(`${where}: expected a vector, got ${typeof data.resultType === "string" ? data.resultType : "nothing"}`);
  }
  const result = data.result;
  if (!Array.isArray(result) || !result.every(isSample)) {
    throw new ReportError(`${where}: HTTP ${status}, a vector whose result is not a list of samples ({"metric": {...}, "value": [time, "value"]})`);
  }
  return result;
}

/**
 * increase() of each counter over the window, summed per group and machine (so that a restarted plugpool's
 * series, which may differ in pod or instance labels, add up). increase() handles the counters' resets at
 * restarts and extrapolates to the window's edges, as Prometheus does:
 * https://prometheus.io/docs/prometheus/latest/querying/functions/#increase
 * All three are evaluated at the same instant `at` (epoch ms): otherwise a scrape landing between two queries
 * would give each figure another window.
 */
async function fromPrometheus(prometheus: Endpoint, windowMs: number, timeoutMs: number, at: number): Promise<{ values: Values; covers: string }> {
  const range = promDuration(windowMs);
  const values: Values = new Map();
  const base = prometheus.shown;
  const api = new URL("api/v1/query", prometheus.url.href.endsWith("/") ? prometheus.url : `${prometheus.url.href}/`);
  for (const name of [ON, USED, AVOIDED]) {
    const query = `sum by (group, machine) (increase(${name}[${range}]))`;
    const url = new URL(api);
    url.searchParams.set("query", query);
    url.searchParams.set("time", (at / 1000).toFixed(3));
    const where = `querying Prometheus at ${base}`;
    const { status, text } = await get(url, prometheus.headers, timeoutMs, where);
    for (const { metric, value: [, raw] } of samplesOf(text, status, where, query)) {
      const value = typeof raw === "string" ? Number(raw) : Number.NaN;
      if (!Number.isFinite(value)) continue;
      put(values, name, labelOf(metric, "group"), labelOf(metric, "machine"), value);
    }
  }
  return { values, covers: `over the last ${formatSpan(windowMs)}, from Prometheus at ${base}` };
}

function labelOf(metric: JsonObject, name: string): string {
  const value = metric[name];
  return typeof value === "string" ? value : "";
}

/** A window as a Prometheus range: whole seconds when it has no fraction of one, else milliseconds. */
export function promDuration(ms: number): string {
  const whole = Math.round(ms);
  return whole % 1000 === 0 ? `${whole / 1000}s` : `${whole}ms`;
}

/** "3d 4h", "24h", "5h 12m", "42m", "30s": days from two on. */
export function formatSpan(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  const [d, h, m] = [Math.floor(s / 86400), Math.floor((s % 86400) / 3600), Math.floor((s % 3600) / 60)];
  if (d >= 2) return h > 0 ? `${d}d ${h}h` : `${d}d`;
  if (d > 0) return `${d * 24 + h}h${m > 0 ? ` ${m}m` : ""}`;
  if (h > 0) return m > 0 ? `${h}h ${m}m` : `${h}h`;
  return m > 0 ? `${m}m` : `${s}s`;
}

function render(rows: readonly MachineFigures[], covers: string): string {
  if (rows.length === 0) return `no machine figures ${covers}\n`;
  const headers = ["GROUP", "MACHINE", "HOURS ON", "KWH USED", "KWH AVOIDED"];
  const cell = (v: number | undefined, digits: number) => (v === undefined ? "-" : v.toFixed(digits));
  const sum = (pick: (r: MachineFigures) => number | undefined) => {
    const known = rows.map(pick).filter((v) => v !== undefined);
    return known.length === 0 ? undefined : known.reduce((a, b) => a + b, 0);
  };
  const cells = [
    ...rows.map((r) => [r.group, r.machine, cell(r.hoursOn, 2), cell(r.kwhUsed, 3), cell(r.kwhAvoided, 3)]),
    ["total", "", cell(sum((r) => r.hoursOn), 2), cell(sum((r) => r.kwhUsed), 3), cell(sum((r) => r.kwhAvoided), 3)],
  ];
  const table = renderTable(headers, cells, ["left", "left", "right", "right", "right"]);
  const notes = "\n'-': no power sensor (kWh used) or no idleWatts (kWh avoided) for that machine\n";
  return `${covers}\n\n${table}\n${rows.some((r) => r.kwhUsed === undefined || r.kwhAvoided === undefined) ? notes : ""}`;
}
