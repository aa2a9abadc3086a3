// scripts/dashboard-picture.ts without its minutes-long run: the SVG renderer (points inside the panel's plot
// box, gaps, state bands, bars, units, XML escaping) and the Grafana side (the query window's step and
// variables, substitution and legends) on deploy/monitoring/grafana-dashboard.yaml itself.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  dashboardOf, dashboardVariables, legendOf, panelTitled, queryWindow, requireData, roundInterval, substitute,
} from "../../scripts/dashboard-picture/grafana.ts";
import { escapeXml, formatValue, renderDashboard, type PanelData, type Picture } from "../../scripts/dashboard-picture/svg.ts";

const picture = (panels: PanelData[]): Picture => ({
  title: "plugpool", subtitle: "test", from: 1000, to: 1100, stepSeconds: 10, columns: 2, panels,
});

const attr = (element: string, name: string): number => {
  const m = new RegExp(`\\s${name}="([^"]*)"`).exec(element);
  assert.ok(m?.[1] !== undefined, `${name} in ${element}`);
  return Number(m[1]);
};
const elements = (svg: string, tag: string, cls: string): string[] => [...svg.matchAll(new RegExp(`<${tag} class="${cls}"[^>]*>`, "g"))].map((m) => m[0]);

/** The points of a path's `d`, one list per M…L run. */
const runsOf = (path: string): [number, number][][] => {
  const d = /\sd="([^"]*)"/.exec(path)?.[1] ?? "";
  return d.split("M").filter((s) => s.trim() !== "").map((run) =>
    run.split("L").map((xy) => xy.trim().split(" ").map(Number) as [number, number]));
};

describe("dashboard picture: the SVG renderer", () => {
  it("maps a series' points into its panel's plot box: range start at the left edge, end at the right, 0 at the bottom, the top value at the top", () => {
    const svg = renderDashboard({ ...picture([{
      kind: "timeseries", title: "Power draw", unit: "watt",
      series: [{ name: "worker-2", points: [{ t: 1000, v: 0 }, { t: 1050, v: 5 }, { t: 1100, v: 10 }] }],
    }]), stepSeconds: 50 });
    const [plot] = elements(svg, "rect", "plot");
    const [path] = elements(svg, "path", "series");
    assert.ok(plot !== undefined && path !== undefined);
    const box = { x: attr(plot, "x"), y: attr(plot, "y"), width: attr(plot, "width"), height: attr(plot, "height") };
    const [run] = runsOf(path);
    assert.deepEqual(run, [
      [box.x, box.y + box.height],
      [box.x + box.width / 2, box.y + box.height / 2],
      [box.x + box.width, box.y],
    ]);
    // Inside the panel's frame, with the y axis in the panel's unit.
    const panel = /<g class="panel"[^>]*>\n<rect x="(\d+)" y="(\d+)" width="(\d+)" height="(\d+)"/.exec(svg);
    const [px, py, pw, ph] = (panel?.slice(1) ?? []).map(Number) as [number, number, number, number];
    assert.ok(box.x > px && box.y > py && box.x + box.width < px + pw && box.y + box.height < py + ph, JSON.stringify({ box, panel: [px, py, pw, ph] }));
    assert.match(svg, />10 W</);
    // Time ticks at whole multiples of their step (20 s here), in UTC.
    assert.match(svg, /<text class="time" x="194.4"[^>]*>00:17:00</);
  });

  it("breaks a line at NaN and where points are more than 1.5 steps apart", () => {
    const svg = renderDashboard(picture([{
      kind: "timeseries", title: "Power-on to Node Ready",
      series: [{ name: "p50", points: [{ t: 1000, v: 1 }, { t: 1010, v: Number.NaN }, { t: 1020, v: 1 }, { t: 1030, v: 2 }, { t: 1060, v: 2 }, { t: 1070, v: 3 }] }],
    }]));
    const [path] = elements(svg, "path", "series");
    assert.deepEqual(runsOf(path ?? "").map((run) => run.length), [1, 2, 2]);
  });

  it("draws a state timeline's bands in the mapped colours, none for a transparent state, to the next point's time", () => {
    const svg = renderDashboard(picture([{
      kind: "state-timeline", title: "Plug on/off",
      states: { 0: { text: "off", color: "transparent" }, 1: { text: "on", color: "green" } },
      series: [{ name: "worker-2", points: [1000, 1010, 1020, 1030, 1040].map((t, i) => ({ t, v: i >= 1 && i <= 2 ? 1 : 0 })) }],
    }]));
    const bands = elements(svg, "rect", "state");
    assert.equal(bands.length, 1);
    const [plot] = elements(svg, "rect", "plot");
    const [band] = bands;
    assert.ok(plot !== undefined && band !== undefined);
    const width = attr(plot, "width");
    assert.equal(attr(band, "x"), attr(plot, "x") + width / 10);
    assert.equal(attr(band, "width"), (2 * width) / 10);
    assert.match(band, /fill="#73BF69"/);
    assert.match(svg, />on</);
  });

  it("draws bars in proportion to the largest, with their values in the panel's unit", () => {
    const svg = renderDashboard(picture([{
      kind: "bars", title: "Energy used (dashboard range)", unit: "kwatth",
      bars: [{ name: "worker-2", value: 0.002 }, { name: "worker-3", value: 0.001 }],
    }]));
    const [a, b] = elements(svg, "rect", "bar");
    assert.ok(a !== undefined && b !== undefined);
    assert.equal(attr(b, "width"), attr(a, "width") / 2);
    assert.match(svg, />2 Wh</);
    assert.match(svg, />1 Wh</);
  });

  it("escapes titles, series names and legends for XML", () => {
    const name = `<b a="1">&'`;
    const svg = renderDashboard(picture([
      { kind: "timeseries", title: "a < b & c", series: [{ name, points: [{ t: 1000, v: 1 }, { t: 1010, v: 2 }] }] },
      { kind: "bars", title: "t", bars: [{ name, value: 1 }] },
    ]));
    assert.ok(!svg.includes("<b"), "no raw tag from a label");
    assert.ok(!svg.includes("& "), "no raw ampersand");
    assert.ok(svg.includes('data-title="a &lt; b &amp; c"'));
    assert.ok(svg.includes(`>${escapeXml(name)}</text>`));
    assert.equal(escapeXml(name), "&lt;b a=&quot;1&quot;&gt;&amp;&apos;");
  });

  it("formats Grafana's units as the dashboard's panels use them, and refuses others", () => {
    assert.equal(formatValue(0.00133, "kwatth"), "1.33 Wh");
    assert.equal(formatValue(80, "watt"), "80 W");
    assert.equal(formatValue(0.05, "h"), "3 min");
    assert.equal(formatValue(0.85, "s"), "850 ms");
    assert.equal(formatValue(2.5, undefined), "2.5");
    assert.throws(() => formatValue(1, "bytes"), /unit "bytes" is not drawn/);
  });
});

describe("dashboard picture: Grafana's side", () => {
  const dashboard = dashboardOf(readFileSync(join(import.meta.dirname, "..", "..", "deploy", "monitoring", "grafana-dashboard.yaml"), "utf8"));

  it("computes step, $__interval, $__rate_interval and $__range as Grafana does", () => {
    // 5 minutes over a 600 px panel: 0.5 s, raised to the 1 s scrape interval; rate over 4 scrapes.
    const short = queryWindow(1000.4, 1300.4, 600, 1);
    assert.equal(short.stepSeconds, 1);
    assert.deepEqual([short.start, short.end], [1000, 1301]);
    assert.equal(short.variables.__rate_interval, "4s");
    assert.equal(short.variables.__range, "300s");
    // A day over 600 px: 144 s rounds to 2 min; rate over 2 min + one 15 s scrape.
    const day = queryWindow(0, 86_400, 600, 15);
    assert.equal(day.stepSeconds, 120);
    assert.equal(day.variables.__interval, "120000ms");
    assert.equal(day.variables.__rate_interval, "135s");
    assert.equal(roundInterval(1_400), 1_000);
    assert.equal(roundInterval(1_600), 2_000);
  });

  it("substitutes the dashboard's variables in a panel's expression, and refuses an unknown one", () => {
    const variables = { ...dashboardVariables(dashboard), ...queryWindow(0, 3600, 600, 15).variables };
    assert.equal(variables.group, ".*");
    const [target] = panelTitled(dashboard, "Hours on (dashboard range)").targets ?? [];
    assert.equal(
      substitute(target?.expr ?? "", variables),
      'sum by (machine) (increase(plugpool_machine_powered_on_seconds_total{group=~".*"}[3600s])) / 3600',
    );
    assert.equal(substitute("x[${__rate_interval}] [[group]]", variables), "x[60s] .*");
    assert.throws(() => substitute("rate(x[$nope])", variables), /no value for the variable \$nope/);
    assert.throws(() => panelTitled(dashboard, "No such panel"), /0 panels titled "No such panel"/);
    // "Power actions" is a row and a panel: the panel.
    assert.equal(panelTitled(dashboard, "Power actions").type, "timeseries");
  });

  it("refuses a panel whose series have no finite value, naming the panel and its queries", () => {
    assert.throws(() => { requireData("Power draw", [], ["sum(x)"]); }, /panel "Power draw" has no data; its queries:\n {2}sum\(x\)/);
    assert.throws(() => { requireData("p", [{ points: [{ v: Number.NaN }] }], ["q"]); }, /no data/);
    requireData("p", [{ points: [{ v: Number.NaN }] }, { points: [{ v: 0 }] }], ["q"]);
  });

  it("names a series by its legendFormat, or by its labels without one", () => {
    assert.equal(legendOf("{{group}} {{ state }}", { group: "workers", state: "running" }), "workers running");
    assert.equal(legendOf("{{missing}}x", {}), "x");
    assert.equal(legendOf(undefined, { a: "1", b: "2" }), '{a="1", b="2"}');
  });
});
