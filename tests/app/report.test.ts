// `plugpool report` against real HTTP servers: a running plugpool's ops server over a pool on fakes, a server
// serving metrics text, and a stand-in for Prometheus's HTTP API answering /api/v1/query in its JSON shape.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { promisify } from "node:util";
import { createMetrics } from "../../src/app/metrics.ts";
import { startOpsServer } from "../../src/app/ops-server.ts";
import { energyReport, formatSpan, promDuration, ReportError } from "../../src/app/report.ts";
import { World } from "../harness/fakes/world.ts";

const HOUR = 3_600_000;
const main = new URL("../../src/app/main.ts", import.meta.url).pathname;

async function serveHttp(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ url: string; server: Server }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

function close(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => {
      resolve();
    });
  });
}

/** A loopback address where nothing listens (a port just freed). */
async function deadUrl(): Promise<string> {
  const { url, server } = await serveHttp(() => undefined);
  await close(server);
  return url;
}

const STARTED_S = 1_800_000_000;

const METRICS_TEXT = [
  "# HELP plugpool_process_start_time_seconds Start time of the process since unix epoch in seconds.",
  "# TYPE plugpool_process_start_time_seconds gauge",
  `plugpool_process_start_time_seconds ${STARTED_S}`,
  "# TYPE plugpool_machine_powered_on_seconds_total counter",
  'plugpool_machine_powered_on_seconds_total{group="workers",machine="worker-1"} 5400',
  'plugpool_machine_powered_on_seconds_total{group="workers",machine="worker-2"} 0',
  'plugpool_machine_powered_on_seconds_total{group="gpu",machine="gpu-1.lab"} 36000',
  "# TYPE plugpool_machine_energy_used_kwh_total counter",
  'plugpool_machine_energy_used_kwh_total{group="workers",machine="worker-1"} 0.0675',
  'plugpool_machine_energy_used_kwh_total{group="gpu",machine="gpu-1.lab"} 4.2',
  "# TYPE plugpool_machine_energy_avoided_kwh_total counter",
  'plugpool_machine_energy_avoided_kwh_total{group="workers",machine="worker-2"} 1.25',
  "",
].join("\n");

describe("plugpool report from a running plugpool's /metrics", () => {
  let endpoint: { url: string; server: Server };
  before(async () => {
    endpoint = await serveHttp((req, res) => {
      if (req.url !== "/metrics") {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" }).end(METRICS_TEXT);
    });
  });
  after(() => close(endpoint.server));

  it("prints hours on, kWh used and avoided per machine, with a total, and '-' where a machine has no figure", async () => {
    const report = await energyReport({
      source: { kind: "metrics", url: `${endpoint.url}/metrics` },
      windowMs: 24 * HOUR,
      now: () => STARTED_S * 1000 + 11 * HOUR,
    });
    assert.deepEqual(report.rows, [
      { group: "gpu", machine: "gpu-1.lab", hoursOn: 10, kwhUsed: 4.2 },
      { group: "workers", machine: "worker-1", hoursOn: 1.5, kwhUsed: 0.0675 },
      { group: "workers", machine: "worker-2", hoursOn: 0, kwhAvoided: 1.25 },
    ]);
    assert.equal(
      report.text,
      [
        `since the plugpool at ${endpoint.url}/metrics started 11h ago (less than the 24h asked for)`,
        "",
        "GROUP    MACHINE    HOURS ON  KWH USED  KWH AVOIDED",
        "gpu      gpu-1.lab     10.00     4.200            -",
        "workers  worker-1       1.50     0.068            -",
        "workers  worker-2       0.00         -        1.250",
        "total                  11.50     4.268        1.250",
        "",
        "'-': no power sensor (kWh used) or no idleWatts (kWh avoided) for that machine",
        "",
      ].join("\n"),
    );
  });

  it("says when the running plugpool's counters span more than the window", async () => {
    const report = await energyReport({
      source: { kind: "metrics", url: `${endpoint.url}/metrics` },
      windowMs: 24 * HOUR,
      now: () => STARTED_S * 1000 + 76 * HOUR,
    });
    assert.match(report.covers, /started 3d 4h ago: a running plugpool's counters cover its whole run, not just the last 24h; use --prometheus/);
  });

  it("reads the figures of a real plugpool's ops server", async () => {
    const w = new World({
      groups: [{ id: "workers", machines: ["worker-1", "worker-2"], sensors: ["worker-1"], idleWatts: { "worker-2": 20 } }],
      on: ["worker-1"],
      poweredByPlugpool: ["worker-1"],
    });
    w.power.setWatts(w.machine("worker-1").power, 60);
    const metrics = createMetrics();
    metrics.observePool(w.pool, w.config);
    const ops = await startOpsServer({ host: "127.0.0.1", port: 0, registry: metrics.registry, readiness: () => [], liveness: () => [] });
    try {
      await w.pool.refresh();
      for (let i = 0; i < 360; i++) {
        w.clock.advance(10_000);
        await w.pool.refresh();
      }
      const report = await energyReport({ source: { kind: "metrics", url: `http://127.0.0.1:${ops.port}/metrics` }, windowMs: 24 * HOUR });
      assert.deepEqual(report.rows, [
        { group: "workers", machine: "worker-1", hoursOn: 1, kwhUsed: 0.06 },
        { group: "workers", machine: "worker-2", hoursOn: 0, kwhAvoided: 0.02 },
      ]);
    } finally {
      await ops.close();
    }
  });

  it("fails with the address and reason when nothing answers, or when the page holds no plugpool figures", async () => {
    const dead = await deadUrl();
    await assert.rejects(
      energyReport({ source: { kind: "metrics", url: `${dead}/metrics` }, windowMs: HOUR, timeoutMs: 500 }),
      (e: unknown) => e instanceof ReportError && e.message === `reading plugpool's metrics at ${dead}/metrics: connect ECONNREFUSED ${dead.slice(7)}`,
    );
    await assert.rejects(
      energyReport({ source: { kind: "metrics", url: `${endpoint.url}/other` }, windowMs: HOUR }),
      (e: unknown) => e instanceof ReportError && /HTTP 404/.test(e.message),
    );
  });
});

/** Answers instant queries as Prometheus's /api/v1/query does, from a table of results by query. */
function fakePrometheus(
  results: Readonly<Record<string, readonly { metric: Record<string, string>; value: string }[]>>,
  seen: string[],
  times: string[] = [],
) {
  return serveHttp((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    const json = (status: number, body: unknown) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
    if (url.pathname !== "/api/v1/query" || req.method !== "GET") {
      res.writeHead(404, { "content-type": "text/plain" }).end("404 page not found\n");
      return;
    }
    const query = url.searchParams.get("query") ?? "";
    const time = url.searchParams.get("time");
    seen.push(query);
    if (time !== null) times.push(time);
    const result = results[query];
    if (result === undefined) {
      json(400, { status: "error", errorType: "bad_data", error: `invalid parameter "query": unknown in this test: ${query}` });
      return;
    }
    const at = time === null ? Date.now() / 1000 : Number(time);
    json(200, { status: "success", data: { resultType: "vector", result: result.map((r) => ({ metric: r.metric, value: [at, r.value] })) } });
  });
}

const q = (name: string, range: string) => `sum by (group, machine) (increase(plugpool_machine_${name}[${range}]))`;

describe("plugpool report from Prometheus", () => {
  it("adds up increase() of each counter over the window at one instant, per group and machine", async () => {
    const seen: string[] = [];
    const times: string[] = [];
    const prom = await fakePrometheus(
      {
        [q("powered_on_seconds_total", "604800s")]: [
          { metric: { group: "workers", machine: "worker-1" }, value: "90000" },
          { metric: { group: "workers", machine: "worker-2" }, value: "3600.5" },
        ],
        [q("energy_used_kwh_total", "604800s")]: [{ metric: { group: "workers", machine: "worker-1" }, value: "31.25" }],
        [q("energy_avoided_kwh_total", "604800s")]: [
          { metric: { group: "workers", machine: "worker-1" }, value: "NaN" },
          { metric: { group: "workers", machine: "worker-2" }, value: "2.9" },
        ],
      },
      seen,
      times,
    );
    try {
      const at = 1_800_000_000_123;
      const report = await energyReport({ source: { kind: "prometheus", url: `${prom.url}/` }, windowMs: 168 * HOUR, now: () => at });
      assert.deepEqual(seen, [q("powered_on_seconds_total", "604800s"), q("energy_used_kwh_total", "604800s"), q("energy_avoided_kwh_total", "604800s")]);
      // One instant for all three: a scrape between the queries must not move the window of some figures.
      assert.deepEqual(times, ["1800000000.123", "1800000000.123", "1800000000.123"]);
      assert.deepEqual(report.rows, [
        { group: "workers", machine: "worker-1", hoursOn: 25, kwhUsed: 31.25 },
        { group: "workers", machine: "worker-2", hoursOn: 3600.5 / 3600, kwhAvoided: 2.9 },
      ]);
      assert.equal(report.covers, `over the last 7d, from Prometheus at ${prom.url}/`);
    } finally {
      await close(prom.server);
    }
  });

  it("passes on Prometheus's own error, and says when the address is no Prometheus", async () => {
    const prom = await fakePrometheus({}, []);
    try {
      await assert.rejects(
        energyReport({ source: { kind: "prometheus", url: prom.url }, windowMs: HOUR }),
        (e: unknown) => e instanceof ReportError && /bad_data: invalid parameter "query"/.test(e.message),
      );
      await assert.rejects(
        energyReport({ source: { kind: "prometheus", url: `${prom.url}/not-prometheus` }, windowMs: HOUR }),
        (e: unknown) => e instanceof ReportError && /HTTP 404, not a Prometheus API answer/.test(e.message),
      );
    } finally {
      await close(prom.server);
    }
  });

  it("writes the window as a Prometheus range", () => {
    assert.equal(promDuration(24 * HOUR), "86400s");
    assert.equal(promDuration(1500), "1500ms");
    assert.equal(formatSpan(90 * 60_000), "1h 30m");
  });
});

describe("plugpool report from a source that answers something else", () => {
  it("fails with a ReportError naming Prometheus for well-formed JSON of another shape", async () => {
    for (const body of [
      "null",
      "[]",
      '{"status":"success","data":null}',
      '{"status":"success","data":{"resultType":"vector","result":{"a":1}}}',
      '{"status":"success","data":{"resultType":"vector","result":[null]}}',
      '{"status":"success","data":{"resultType":"vector","result":[{"metric":null,"value":[1,"2"]}]}}',
    ]) {
      const prom = await serveHttp((_, res) => res.writeHead(200, { "content-type": "application/json" }).end(body));
      try {
        await assert.rejects(energyReport({ source: { kind: "prometheus", url: prom.url }, windowMs: HOUR }), (e: unknown) => {
          assert.ok(e instanceof ReportError, `${body}: ${String(e)}`);
          assert.match(e.message, new RegExp(`^querying Prometheus at ${prom.url}: (HTTP 200, not a Prometheus API answer|expected a vector, got nothing|HTTP 200, a vector whose result is not a list of samples)`), body);
          return true;
        });
      } finally {
        await close(prom.server);
      }
    }
  });

  it("stops reading an answer larger than 16 MiB, and one that does not arrive whole within the timeout", async () => {
    const chunk = Buffer.alloc(1024 * 1024, "# filler\n");
    const endless = await serveHttp((_, res) => {
      res.writeHead(200, { "content-type": "text/plain" });
      const more = (): void => {
        while (res.write(chunk));
      };
      res.on("drain", more);
      more();
    });
    const stalling = await serveHttp((_, res) => {
      res.writeHead(200, { "content-type": "application/json" }).write('{"status":"succ');
    });
    try {
      await assert.rejects(
        energyReport({ source: { kind: "metrics", url: `${endless.url}/metrics` }, windowMs: HOUR }),
        (e: unknown) => e instanceof ReportError && e.message === `reading plugpool's metrics at ${endless.url}/metrics: HTTP 200 with an answer of more than 16777216 bytes`,
      );
      for (const kind of ["metrics", "prometheus"] as const) {
        await assert.rejects(energyReport({ source: { kind, url: stalling.url }, windowMs: HOUR, timeoutMs: 300 }), (e: unknown) => {
          assert.ok(e instanceof ReportError, String(e));
          assert.match(e.message, new RegExp(`at ${stalling.url}: the answer did not arrive whole within 300 ms$`));
          return true;
        });
      }
    } finally {
      endless.server.closeAllConnections();
      stalling.server.closeAllConnections();
      await Promise.all([close(endless.server), close(stalling.server)]);
    }
  });
});

describe("plugpool report from an address with a user name and password", () => {
  it("sends the user name and password of an address as Basic authentication, and shows the address without them", async () => {
    const authorization: (string | undefined)[] = [];
    const answers = await serveHttp((req, res) => {
      authorization.push(req.headers.authorization);
      if (req.url?.startsWith("/api/v1/query?") === true) {
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ status: "success", data: { resultType: "vector", result: [] } }));
      } else {
        res.writeHead(200).end(METRICS_TEXT);
      }
    });
    const dead = await deadUrl();
    // Percent-encoded in the URL, as typed into a shell: sent decoded, as curl does.
    const withPassword = (url: string) => url.replace("http://", "http://reader:Pr0m%20Secret@");
    const basic = `Basic ${Buffer.from("reader:Pr0m Secret").toString("base64")}`;
    try {
      const metrics = await energyReport({ source: { kind: "metrics", url: withPassword(`${answers.url}/metrics`) }, windowMs: HOUR });
      const prometheus = await energyReport({ source: { kind: "prometheus", url: withPassword(answers.url) }, windowMs: HOUR });
      assert.deepEqual(authorization, [basic, basic, basic, basic]);
      assert.match(metrics.covers, new RegExp(`^since the plugpool at ${answers.url}/metrics started`));
      assert.equal(prometheus.covers, `over the last 1h, from Prometheus at ${answers.url}/`);
      for (const kind of ["metrics", "prometheus"] as const) {
        await assert.rejects(energyReport({ source: { kind, url: withPassword(dead) }, windowMs: HOUR, timeoutMs: 500 }), (e: unknown) => {
          assert.ok(e instanceof ReportError);
          assert.match(e.message, new RegExp(`at ${dead}/: connect ECONNREFUSED`));
          assert.doesNotMatch(e.message, /reader|Pr0m/);
          return true;
        });
      }
      await assert.rejects(
        energyReport({ source: { kind: "prometheus", url: "reader:Pr0m Secret@prometheus:9090" }, windowMs: HOUR }),
        (e: unknown) => e instanceof ReportError && e.message === "the Prometheus address is not an http:// or https:// URL",
      );
    } finally {
      await close(answers.server);
    }
  });
});

describe("plugpool report (command line)", () => {
  const run = promisify(execFile);

  it("prints the table from --metrics-url and exits 0", async () => {
    const endpoint = await serveHttp((_, res) => res.writeHead(200).end(METRICS_TEXT));
    try {
      const { stdout } = await run(process.execPath, [main, "report", "--metrics-url", `${endpoint.url}/metrics`], { timeout: 20_000 });
      assert.match(stdout, /^gpu {6}gpu-1\.lab {5}10\.00 {5}4\.200 {12}-$/m);
    } finally {
      await close(endpoint.server);
    }
  });

  it("refuses a bad window and both sources at once with exit code 2, and a source that fails with 1", async () => {
    const fails = (args: string[]) =>
      run(process.execPath, [main, "report", ...args], { timeout: 20_000 }).then(
        () => assert.fail("expected a failure"),
        (e: unknown) => e as { code: number; stderr: string },
      );
    const bad = await fails(["--window", "1d", "--metrics-url", "http://a", "--prometheus", "http://b"]);
    assert.equal(bad.code, 2);
    assert.equal(bad.stderr, 'plugpool report: --window: must be a duration of more than 0 such as 24h or 168h (found "1d"); --metrics-url and --prometheus: give one or neither\n');
    const dead = await deadUrl();
    const down = await fails(["--prometheus", dead]);
    assert.equal(down.code, 1);
    assert.equal(down.stderr, `plugpool report: querying Prometheus at ${dead}: connect ECONNREFUSED ${dead.slice(7)}\n`);
  });
});
