// Plug credentials never leave plugpool, end to end: `plugpool serve` as a process (as the container runs it)
// against a real kube-apiserver and emulated plugs that require credentials, driven from outside into every
// error path a plug can cause — wrong credentials, answers echoing the request's headers (Authorization
// included) on 200, 500 and 401, silence, endless and trickling bodies, HTTP 500 — through Refresh,
// NodeGroupIncreaseSize and NodeGroupDeleteNodes, plus `plugpool doctor` on the same config. Then everything
// that left the processes is scanned for the password in every spelling it could take on the way out: the
// whole log, every gRPC answer, every Event in the cluster, /metrics and doctor's output.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Metadata, status, type ServiceError } from "@grpc/grpc-js";
import type { CoreV1Api } from "@kubernetes/client-node";
import type { ControlPlane } from "../harness/control-plane/index.ts";
import { startPlugEmulator, type EmulatedPlug, type Fault, type PlugEmulatorOptions } from "../harness/plug-emulator/index.ts";
import { createCloudProviderClient, type CloudProviderClient } from "../harness/grpc-client.ts";
import { eventually } from "../harness/eventually.ts";
import { plugpoolConfig, PREFIX, startCluster } from "../harness/site/index.ts";

const main = new URL("../../src/app/main.ts", import.meta.url).pathname;
const USERNAME = "plug-admin";
// Distinctive and awkward on purpose: `+` and `/` change under URL-encoding and stand out in base64's
// alphabet, `!` and `%` are special to URLs, `ä` is two bytes in UTF-8 and escaped by some encoders.
const PASSWORD = "Zq9!pass+word/ä%";
// A second secret, one plug's own, read from files rather than the environment.
const FILE_USERNAME = "strip-admin";
const FILE_PASSWORD = "Fk7$file;pw=ü&";
const GRPC_DEADLINE_MS = 20_000;
// Long enough that the first IncreaseSize, right after start, lands within it even on a loaded machine.
const INRUSH_INTERVAL = "6s";

interface PlugSpec {
  readonly name: string;
  readonly emulator: PlugEmulatorOptions;
  /** Injected once every healthy plug has been read and the first machines switched on (at start when `early`). */
  readonly fault?: Fault;
  readonly early?: boolean;
  readonly fileCredentials?: boolean;
  readonly powerSensor?: string;
}

const basicEsp32 = (password = PASSWORD): PlugEmulatorOptions => ({ version: "2026.7", platform: "esp32", auth: { type: "basic", username: USERNAME, password } });
const digestEsp8266 = (password = PASSWORD): PlugEmulatorOptions => ({ version: "2026.7", platform: "esp8266", auth: { type: "digest", username: USERNAME, password } });

// Config order matters: scale-up takes machines in this order, so `queued-401` and `cut` are the first two,
// queued by the inrush limit and switched on by the power-on runner.
const SPECS: readonly PlugSpec[] = [
  // Refuses the switch-on from the start (reads are fine): the queued plug-on fails in the runner, and the
  // instance carries the error to CA.
  { name: "queued-401", emulator: basicEsp32(), fault: { kind: "echo", status: 401, method: "POST", withAuth: true }, early: true },
  { name: "cut", emulator: basicEsp32(), fault: { kind: "echo", withAuth: true } },
  { name: "wrong-basic", emulator: basicEsp32("not-the-password") },
  { name: "wrong-digest", emulator: digestEsp8266("not-the-password") },
  { name: "echo-200", emulator: basicEsp32(), fault: { kind: "echo", withAuth: true } },
  { name: "echo-500", emulator: { ...basicEsp32(), version: "2026.1" }, fault: { kind: "echo", status: 500, withAuth: true } },
  { name: "echo-401", emulator: basicEsp32(), fault: { kind: "echo", status: 401, withAuth: true } },
  { name: "echo-digest", emulator: digestEsp8266(), fault: { kind: "echo", status: 500, withAuth: true } },
  { name: "echo-on-500", emulator: basicEsp32(), fault: { kind: "echo", status: 500, method: "POST", withAuth: true } },
  { name: "echo-on-401", emulator: basicEsp32(), fault: { kind: "echo", status: 401, method: "POST", withAuth: true } },
  { name: "echo-sensor", emulator: { ...basicEsp32(), switches: [{ name: "Relay", powerSensor: "Power" }] }, powerSensor: "Power", fault: { kind: "echo", domain: "sensor", withAuth: true } },
  { name: "huge", emulator: basicEsp32(), fault: { kind: "huge", withAuth: true } },
  { name: "huge-chunked", emulator: { ...basicEsp32(), platform: "esp8266" }, fault: { kind: "huge", chunked: true, withAuth: true } },
  { name: "drip", emulator: basicEsp32(), fault: { kind: "drip", ms: 50, withAuth: true } },
  { name: "timeout", emulator: basicEsp32(), fault: { kind: "timeout", withAuth: true } },
  { name: "http500", emulator: basicEsp32(), fault: { kind: "http500", withAuth: true } },
  {
    name: "own-credentials",
    emulator: { version: "2026.7", platform: "esp32", auth: { type: "basic", username: FILE_USERNAME, password: FILE_PASSWORD } },
    fileCredentials: true,
    fault: { kind: "echo", withAuth: true },
  },
];
const ECHOING = SPECS.filter((s) => s.fault?.kind === "echo").map((s) => s.name);
// What the run must have shown, so that a clean scan means something.
const SHORTFALL = ["echo-401", "echo-on-401"];
const EXPECTED_EVENTS = [
  ...["wrong-basic", "wrong-digest", "echo-200", "echo-500", "echo-401", "echo-digest", "huge", "huge-chunked", "drip", "timeout", "http500", "own-credentials"].map((m) => `PlugReadFailed/${m}`),
  ...["echo-401", "echo-on-401", "queued-401"].map((m) => `PowerOnFailed/${m}`),
  "PowerOnQueued/queued-401",
  "PowerOnQueued/cut",
  "Quarantined/queued-401",
];
const DOCTOR_FAILS = ["wrong-basic", "wrong-digest", "echo-200", "echo-500", "echo-401", "huge", "drip", "timeout", "http500", "own-credentials"];

interface Needle {
  readonly what: string;
  readonly text: string;
  readonly anyCase?: boolean;
}

/** Every spelling of a secret that could leave the process: plain, base64 (alone, in `user:pass`, at any byte alignment inside a longer base64 text, URL-safe alphabet), URL-encoded, JSON-escaped. */
function needlesFor(username: string, password: string): Needle[] {
  const b64 = (bytes: Buffer | string): string => Buffer.from(bytes).toString("base64");
  const b64url = (text: string): string => text.replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  const bytes = Buffer.from(password, "utf8");
  // A secret inside a longer encoded text starts at some byte offset mod 3; from the next 3-byte boundary on,
  // its whole groups encode to the same characters, whatever surrounds them.
  const aligned = [0, 1, 2].map((skip) => b64(bytes.subarray(skip, skip + Math.floor((bytes.length - skip) / 3) * 3)));
  // The leading characters that no JSON, HTML or URL encoder rewrites: found even where the rest is escaped.
  const stablePrefix = /^[^/\\"<>&'%\u0080-\uffff]*/u.exec(password)?.[0] ?? "";
  const needles: Needle[] = [
    { what: "plain", text: password },
    { what: `its first ${stablePrefix.length} characters`, text: stablePrefix },
    { what: "JSON \\u-escaped", text: JSON.stringify(password).slice(1, -1).replace(/[^\x20-\x7e]/gu, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`), anyCase: true },
    { what: "base64 of user:pass", text: b64(`${username}:${password}`) },
    { what: "base64 of the password", text: b64(password) },
    ...aligned.map((text, skip) => ({ what: `base64 of the password from byte ${skip}`, text })),
    ...aligned.map((text, skip) => ({ what: `base64url of the password from byte ${skip}`, text: b64url(text) })),
    { what: "URL-encoded (encodeURIComponent)", text: encodeURIComponent(password), anyCase: true },
    { what: "URL-encoded (form)", text: new URLSearchParams({ p: password }).toString().slice(2), anyCase: true },
  ];
  assert.ok(stablePrefix.length >= 8, "the prefix alone is distinctive");
  return needles;
}

const NEEDLES = [...needlesFor(USERNAME, PASSWORD), ...needlesFor(FILE_USERNAME, FILE_PASSWORD)];

/**
 * `text` with every run of %XX escapes decoded as UTF-8. grpc-js decodes a status message with decodeURI,
 * which leaves reserved characters escaped (`%2B`, `%2F`, `%3A`…): a secret can arrive half-encoded, in a
 * spelling neither its plain nor its encodeURIComponent form matches.
 */
function percentDecoded(text: string): string {
  return text.replace(/(?:%[0-9A-Fa-f]{2})+/gu, (run) => Buffer.from(run.replace(/%/gu, ""), "hex").toString("utf8"));
}

/** Every needle found in `text` (as it is and percent-decoded), with a little context, for the failure message. */
function findings(source: string, raw: string): string[] {
  const found: string[] = [];
  for (const [form, text] of [["", raw], [" (percent-decoded)", percentDecoded(raw)]] as const) {
    const lower = text.toLowerCase();
    for (const { what, text: needle, anyCase } of NEEDLES) {
      const at = anyCase === true ? lower.indexOf(needle.toLowerCase()) : text.indexOf(needle);
      if (at >= 0) found.push(`${source}${form}: ${what} (${JSON.stringify(needle)}) in …${text.slice(Math.max(0, at - 120), at + needle.length + 40)}…`);
    }
  }
  return found;
}

/** A JSON text of anything the client received: bigints, byte arrays and Buffers as text (UTF-8 and base64 both). */
function serialised(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (typeof v === "bigint") return v.toString();
    if (v instanceof Uint8Array) return `${Buffer.from(v).toString("utf8")} ${Buffer.from(v).toString("base64")}`;
    if (v instanceof Metadata) return serialised(v.getMap());
    return v;
  });
}

function grpcErrorText(error: ServiceError): string {
  return serialised({ code: error.code, message: error.message, details: error.details, metadata: error.metadata });
}

async function runToEnd(child: ChildProcess, timeoutMs: number): Promise<number | null> {
  const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
  try {
    const [code] = (await once(child, "exit")) as [number | null];
    return code;
  } finally {
    clearTimeout(timer);
  }
}

describe("plugpool serve and doctor (processes) facing plugs that fail with credentials", () => {
  let plane: ControlPlane;
  let core: CoreV1Api;
  let dir: string;
  let configPath: string;
  const plugs = new Map<string, EmulatedPlug>();
  let child: ChildProcess | undefined;
  let client: CloudProviderClient | undefined;
  let out = "";
  const env = { PATH: process.env.PATH ?? "", PLUGPOOL_PLUG_USERNAME: USERNAME, PLUGPOOL_PLUG_PASSWORD: PASSWORD };

  function configText(opsPort = 0): string {
    const nodes = SPECS.map((s) => {
      const sensor = s.powerSensor === undefined ? {} : { powerSensor: s.powerSensor };
      const own = s.fileCredentials === true ? { credentials: { usernameFile: join(dir, "username"), passwordFile: join(dir, "password") } } : {};
      return { name: s.name, plug: { url: plugs.get(s.name)?.url ?? "", switch: "Relay", ...sensor, ...own } };
    });
    return plugpoolConfig({
      opsPort,
      groups: [{ id: "workers", nodes }],
      deviceTimeout: "1s",
      sections: {
        // Only to queue the first plug-ons: with a limit, nothing is switched on in the first interval.
        scaleUp: { maxPowerOnsPerInterval: 100, powerOnInterval: INRUSH_INTERVAL },
      },
    });
  }

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "plugpool-secrets-"));
    // A mounted Secret's files end in a newline that is no part of the value.
    writeFileSync(join(dir, "username"), `${FILE_USERNAME}\n`);
    writeFileSync(join(dir, "password"), `${FILE_PASSWORD}\n`);
    ({ plane, core } = await startCluster({ controllers: false, setup: "bare" }));
    for (const s of SPECS) {
      const plug = await startPlugEmulator(s.emulator);
      if (s.early === true && s.fault) await plug.inject(s.fault);
      plugs.set(s.name, plug);
    }
    configPath = join(dir, "config.yaml");
    writeFileSync(configPath, configText());
  });

  after(async () => {
    client?.close();
    if (child?.exitCode === null) child.kill("SIGKILL");
    await Promise.all([...plugs.values()].map((p) => p.close()));
    await plane.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("never shows a plug password in logs, gRPC answers, Events, metrics or doctor's output", async () => {
    const started = performance.now();
    // --log-level debug: the most a log can say.
    const serve = spawn(process.execPath, [main, "serve", "--config", configPath, "--kubeconfig", plane.kubeconfigPath, "--log-level", "debug"], {
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    child = serve;
    // Decoded as a stream, so a character split across chunks stays whole.
    serve.stdout.setEncoding("utf8");
    serve.stderr.setEncoding("utf8");
    serve.stdout.on("data", (d: string) => (out += d));
    serve.stderr.on("data", (d: string) => (out += d));
    const logLines = (): Record<string, unknown>[] =>
      out.split("\n").flatMap((line) => {
        try {
          return [JSON.parse(line) as Record<string, unknown>];
        } catch {
          return [];
        }
      });
    await eventually("the serving log line", () => {
      assert.ok(logLines().some((l) => l.message === "serving"), out);
    }, 60_000);
    const serving = logLines().find((l) => l.message === "serving");
    const grpcAddress = String(serving?.grpc);
    const opsPort = Number(serving?.ops);
    // The same config for doctor, with the ops port serve actually took, so doctor also reads the running instance.
    writeFileSync(configPath, configText(opsPort));
    const rpc = createCloudProviderClient(grpcAddress);
    client = rpc;

    const grpcErrors: string[] = [];
    const grpcResponses: string[] = [];
    const call = async <M extends Parameters<CloudProviderClient["call"]>[0]>(method: M, request: Parameters<CloudProviderClient["call"]>[1] & object) => {
      const result = await rpc.call(method, request as never, { deadlineMs: GRPC_DEADLINE_MS });
      if (result.error) grpcErrors.push(grpcErrorText(result.error));
      if (result.response !== undefined) grpcResponses.push(serialised(result.response));
      return result;
    };

    // Every healthy plug read (their devices have asked for credentials by now), then the first two queued
    // (the inrush interval after start) and switched on by the runner once it is over.
    assert.equal((await call("refresh", {})).error, undefined);
    const first = await call("nodeGroupIncreaseSize", { id: "workers", delta: 2 });
    assert.equal(first.error, undefined, first.error?.details);
    await eventually("the queued plug-ons carried out", () => {
      assert.equal(plugs.get("cut")?.state("Relay"), true);
      assert.ok(logLines().some((l) => l.event === "quarantined" && l.machine === "queued-401"), out);
    }, 30_000);

    for (const s of SPECS) if (s.fault && s.early !== true) await plugs.get(s.name)?.inject(s.fault);
    // Every read of a faulty plug fails now (PlugReadFailed), with the echoed headers in the answers.
    await call("refresh", {});
    // Every other machine whose plug was read off once is tried: each switch-on fails in its own way.
    const candidates = SPECS.filter((s) => !["queued-401", "cut", "wrong-basic", "wrong-digest"].includes(s.name));
    const increase = await call("nodeGroupIncreaseSize", { id: "workers", delta: candidates.length });
    // The unregistered instance CA drops: its switch-off meets an echoing plug.
    const drop = await call("nodeGroupDeleteNodes", {
      id: "workers",
      nodes: [{ name: `${PREFIX}cut`, providerID: `${PREFIX}cut`, annotations: { "k8s.io/cluster-autoscaler/fake-node-reason": "unregistered" } }],
    });
    const nodes = await call("nodeGroupNodes", { id: "workers" });
    await call("nodeGroupTargetSize", { id: "workers" });
    await call("nodeGroups", {});
    await call("refresh", {});

    const doctorRun = spawn(process.execPath, [main, "doctor", "--config", configPath, "--kubeconfig", plane.kubeconfigPath], {
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let doctorOut = "";
    doctorRun.stdout.setEncoding("utf8");
    doctorRun.stderr.setEncoding("utf8");
    doctorRun.stdout.on("data", (d: string) => (doctorOut += d));
    doctorRun.stderr.on("data", (d: string) => (doctorOut += d));
    const doctorCode = await runToEnd(doctorRun, 60_000);

    const metrics = await (await fetch(`http://127.0.0.1:${opsPort}/metrics`)).text();
    // Events are written in the background: wait until the failures are on the cluster.
    const eventKey = (e: { reason?: string; involvedObject: { name?: string } }): string => `${e.reason ?? ""}/${e.involvedObject.name ?? ""}`;
    await eventually("the failures as Events", async () => {
      const seen = new Set((await core.listEventForAllNamespaces()).items.map(eventKey));
      for (const key of EXPECTED_EVENTS) assert.ok(seen.has(key), `${key} in ${[...seen].join(", ")}`);
    }, 30_000).catch(() => undefined); // judged below, with everything else

    serve.kill("SIGTERM");
    const serveCode = await runToEnd(serve, 30_000);
    const events = (await core.listEventForAllNamespaces()).items;
    const lines = logLines();

    const sources: [string, string][] = [
      ["serve stdout+stderr", out],
      ["gRPC errors", grpcErrors.join("\n")],
      ["gRPC responses", grpcResponses.join("\n")],
      ["Events (all namespaces)", events.map((e) => serialised(e)).join("\n")],
      ["/metrics", metrics],
      ["doctor stdout+stderr", doctorOut],
    ];
    const leaks = sources.flatMap(([source, text]) => findings(source, text));
    for (const [source, text] of sources) console.log(`secrets: scanned ${Buffer.byteLength(text)} bytes of ${source}`);
    console.log(`secrets: ${events.length} Events, ${grpcErrors.length} gRPC errors, ${lines.length} log lines; ${NEEDLES.length} spellings; ${((performance.now() - started) / 1000).toFixed(1)} s`);
    // A folder to keep what was scanned in, for a look by hand.
    if (process.env.PLUGPOOL_SECRETS_DUMP !== undefined) {
      for (const [source, text] of sources) writeFileSync(join(process.env.PLUGPOOL_SECRETS_DUMP, `${source.replace(/[^a-z]+/giu, "-")}.txt`), text);
    }
    assert.deepEqual(leaks, []);
    // The scan finds a secret in every shape it could leave in.
    const b64 = (text: string): string => Buffer.from(text).toString("base64");
    const shapes = [
      JSON.stringify({ error: `GET /switch/Relay: {"authorization":"Basic ${b64(`${USERNAME}:${PASSWORD}`)}"}` }),
      JSON.stringify({ message: PASSWORD }).replace(/ä/gu, "\\u00e4"),
      `14 UNAVAILABLE: ${decodeURI(encodeURIComponent(`echo: ${PASSWORD}`))}`,
      `http://${USERNAME}:${encodeURIComponent(PASSWORD)}@127.0.0.1/`,
      ...["", "x", "xy"].map((pad) => b64(`${pad}{"authorization":"${FILE_PASSWORD}"}`)),
      `body ${Buffer.from(PASSWORD).toString("base64url")}`,
    ];
    for (const shape of shapes) assert.notDeepEqual(findings("self-check", shape), [], `the scan finds the secret in ${shape}`);

    // The scan saw the failure paths, so it cannot pass for want of them.
    assert.equal(serveCode, 0, out);
    assert.ok(lines.some((l) => l.message === "stopped"), out);
    // The secrets really went out into hostile answers: each echoing device answered a request that carried them.
    for (const name of ECHOING) {
      const echoed = plugs.get(name)?.calls.filter((c) => c.auth !== "none" && c.status !== undefined && c.status !== 404);
      assert.ok((echoed?.length ?? 0) > 0, `${name} echoed a request with credentials`);
    }
    assert.equal(increase.error?.code, status.UNAVAILABLE, increase.error?.details);
    // The answer to CA is capped; the log line of the failed call has the whole of it.
    const logged = lines.find((l) => l.message === "rpc failed" && l.method === "NodeGroupIncreaseSize");
    const whole = logged?.error;
    const shortfall = percentDecoded(typeof whole === "string" ? whole : increase.error.details);
    for (const name of SHORTFALL) assert.match(shortfall, new RegExp(`\\b${name}: `), `the shortfall names ${name}: ${shortfall}`);
    // A healthy plug may miss its first read on a loaded machine too; the two that refuse the credentials never read.
    const neverRead = /never read successfully: ([^;]*)/.exec(shortfall)?.[1]?.split(", ") ?? [];
    for (const name of ["wrong-basic", "wrong-digest"]) assert.ok(neverRead.includes(name), `${name} never read: ${shortfall}`);
    assert.notEqual(drop.error, undefined, "the switch-off of cut fails");
    const failedInstance = nodes.response?.instances.find((i) => i.id === `${PREFIX}queued-401`);
    assert.match(failedInstance?.status?.errorInfo?.errorMessage ?? "", /switching on the plug of queued-401 failed: turning on plug/, "the instance carries its plug error");
    const seen = new Set(events.map(eventKey));
    for (const key of EXPECTED_EVENTS) assert.ok(seen.has(key), `${key} in ${[...seen].join(", ")}`);
    assert.ok(
      lines.some((l) => /wrong-basic/.test(String(l.message)) && /rejected the credentials|unauthori[sz]ed|\b401\b/i.test(String(l.message))),
      "a log line says the credentials were refused",
    );
    assert.ok(lines.some((l) => l.message === "rpc failed" && l.method === "NodeGroupIncreaseSize"), "the failed IncreaseSize is logged");
    assert.equal(doctorCode, 1, doctorOut);
    for (const name of DOCTOR_FAILS) assert.match(doctorOut, new RegExp(`^.*\\b${name} \\(.*\\bFAIL\\b|^.*\\bFAIL\\b.*\\b${name} \\(`, "mu"), `doctor fails ${name}:\n${doctorOut}`);
    assert.match(doctorOut, /rejected the credentials/);
    assert.match(doctorOut, /power sensor: /, "doctor reports echo-sensor's sensor failure");
    assert.match(doctorOut, /serving; instances/, "doctor read the running instance");
    assert.match(metrics, /plugpool_plug_requests_total\{machine="echo-401",operation="read",result="plug-[a-z-]+"\}/);
  });
});
