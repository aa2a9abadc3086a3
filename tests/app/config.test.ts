import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { inspect } from "node:util";
import { ConfigError, loadConfig, loadConfigFile, type AppConfig } from "../../src/app/config/index.ts";
import type { EsphomePlug } from "../../src/adapters/esphome/plug.ts";
import { config, esphomePlugs, group, issuesOf, load, node } from "./fixtures/config-builders.ts";

const fixture = (name: string) => new URL(`fixtures/${name}`, import.meta.url).pathname;
const read = (name: string) => readFileSync(fixture(name), "utf8");

const POWER_OFF_DEFAULTS = {
  notReadyTimeoutMs: 300_000,
  onShutdownTimeout: "keep-power" as const,
  maxPodAttempts: 3,
  graceMs: 120_000,
  standbyWatts: 5,
  standbyWindowMs: 20_000,
  retryMs: 5_000,
  maxRetryMs: 120_000,
};

function frozenEverywhere(value: unknown, path = "config"): string[] {
  if (typeof value !== "object" || value === null) return [];
  const here = Object.isFrozen(value) ? [] : [path];
  return [...here, ...Object.entries(value).flatMap(([key, child]) => frozenEverywhere(child, `${path}.${key}`))];
}

describe("loadConfig()", () => {
  describe("with the README's example configuration", () => {
    const loaded = loadConfig(read("spec-example.yaml"), {});

    it("loads it to the typed value, with every default applied", () => {
      const machine = (name: string, index: number) => ({
        name,
        group: "workers",
        index,
        hold: false,
        power: { backend: "esphome", key: `esphome plug-${name}.example relay`, label: `plug http://plug-${name}.example switch "Relay"`, measuresWatts: false },
      });
      const plug = (name: string) => ({ url: `http://plug-${name}.example`, device: `plug-${name}.example`, switch: "Relay" });
      const expected: AppConfig = {
        listen: { host: "127.0.0.1", port: 8086 },
        opsListen: { host: "0.0.0.0", port: 8087 },
        deviceTimeoutsMs: new Map([
          ["esphome", 2_000],
          ["shelly", 2_000],
          ["home-assistant", 4_000],
          ["redfish", 10_000],
        ]),
        warnings: [],
        powerControls: new Map(["worker-1", "worker-2"].map((name) => [
          `esphome plug-${name}.example relay`,
          { backend: "esphome", address: plug(name) },
        ])),
        powerOffPod: { namespace: "plugpool", image: "busybox:1.37.0" },
        leaderElection: { lease: "plugpool", followAutoscaler: { name: "cluster-autoscaler" } },
        pool: {
          providerIDPrefix: "k3s://",
          gpuLabel: "nvidia.com/gpu.product",
          gpuTypes: [],
          powerOff: POWER_OFF_DEFAULTS,
          scaleUp: { maxPowerOnsPerInterval: 0, powerOnIntervalMs: 10_000, order: "config" },
          quarantine: { initialMs: 600_000, maxMs: 14_400_000 },
          groups: [
            {
              id: "workers",
              minSize: 0,
              maxSize: 2,
              template: { cpu: "24", memory: "64Gi", pods: "110", resources: {}, labels: { "example.com/pool": "workers", "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux" }, taints: [] },
              machines: [machine("worker-1", 0), machine("worker-2", 1)],
            },
          ],
        },
      };
      assert.deepEqual(loaded, expected);
    });

    it("gives the same value as the file with every default written out (the documented defaults are the applied ones)", () => {
      assert.deepEqual(loaded, loadConfig(read("documented-defaults.yaml"), {}));
    });
  });

  describe("with every key set", () => {
    const loaded = loadConfig(read("every-key.yaml"), {});

    it("reads the addresses, TLS files and device timeouts", () => {
      assert.deepEqual(loaded.listen, { host: "::1", port: 9086 });
      assert.deepEqual(loaded.opsListen, { host: "127.0.0.1", port: 9087 });
      assert.deepEqual(loaded.tls, {
        certFile: "/etc/plugpool/tls/tls.crt",
        keyFile: "/etc/plugpool/tls/tls.key",
        caFile: "/etc/plugpool/tls/ca.crt",
        clientNames: ["cluster-autoscaler.plugpool.svc", "spiffe://cluster.local/ns/plugpool/sa/cluster-autoscaler"],
      });
      assert.deepEqual(
        [...loaded.deviceTimeoutsMs],
        [
          ["esphome", 1_500],
          ["shelly", 1_000],
          ["home-assistant", 3_000],
          ["redfish", 20_000],
        ],
      );
      assert.deepEqual(loaded.warnings, []);
    });

    it("reads the power-off settings, with the fixed retry delays", () => {
      assert.deepEqual(loaded.powerOffPod, { namespace: "power", image: "registry.example/tools:1.0" });
      assert.deepEqual(loaded.pool.powerOff, {
        notReadyTimeoutMs: 180_000,
        onShutdownTimeout: "keep-power",
        maxPodAttempts: 3,
        graceMs: 90_000,
        standbyWatts: 2.5,
        standbyWindowMs: 30_000,
        retryMs: 5_000,
        maxRetryMs: 120_000,
      });
    });

    it("reads the inrush limit, the scale-up order and the quarantine back-off", () => {
      assert.deepEqual(loaded.pool.scaleUp, { maxPowerOnsPerInterval: 2, powerOnIntervalMs: 30_000, order: "efficient" });
      assert.deepEqual(loaded.pool.quarantine, { initialMs: 300_000, maxMs: 7_200_000 });
    });

    it("reads the pool settings", () => {
      assert.equal(loaded.pool.providerIDPrefix, "metal://");
      assert.equal(loaded.pool.gpuLabel, "example.com/gpu");
      assert.deepEqual(loaded.pool.gpuTypes, ["nvidia-rtx-4090", "nvidia-a2"]);
    });

    it("reads templates, writing quantities given as YAML numbers as strings", () => {
      const [workers, gpu] = loaded.pool.groups;
      assert.ok(workers && gpu);
      assert.deepEqual(workers.template, {
        cpu: "24",
        memory: "64Gi",
        pods: "250",
        resources: { "ephemeral-storage": "100Gi" },
        labels: { "example.com/pool": "workers", "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux" },
        taints: [
          { key: "example.com/dedicated", value: "batch", effect: "NoSchedule" },
          { key: "example.com/spot", value: "", effect: "PreferNoSchedule" },
        ],
      });
      assert.deepEqual(gpu.template.resources, { "nvidia.com/gpu": "1" });
      assert.deepEqual(gpu.template.labels, { "kubernetes.io/arch": "arm64", "kubernetes.io/os": "linux" });
      assert.deepEqual([workers.minSize, workers.maxSize, gpu.minSize, gpu.maxSize], [1, 2, 0, 1]);
    });

    it("numbers machines across all groups in config order and names their group", () => {
      const machines = loaded.pool.groups.flatMap((g) => g.machines);
      assert.deepEqual(
        machines.map((m) => [m.name, m.group, m.index, m.hold]),
        [
          ["worker-1", "workers", 0, false],
          ["worker-2", "workers", 1, true],
          ["gpu-1.lab", "gpu", 2, false],
        ],
      );
    });

    it("gives each machine its own idleWatts, else its group's, else none", () => {
      const machines = loaded.pool.groups.flatMap((g) => g.machines);
      assert.deepEqual(
        machines.map((m) => [m.name, m.idleWatts]),
        [
          ["worker-1", 18.5],
          ["worker-2", 0],
          ["gpu-1.lab", undefined],
        ],
      );
      assert.equal("idleWatts" in (machines[2] ?? {}), false);
    });

    it("normalises plug URLs, names their devices and keeps switch and power sensor names as written", () => {
      const plugs = esphomePlugs(loaded);
      assert.deepEqual(plugs, [
        { url: "http://plug-worker-1.example", device: "plug-worker-1.example", switch: "Relay" },
        { url: "https://plug-worker-2.example:8443", device: "plug-worker-2.example:8443", switch: "Relay", powerSensor: "Power" },
        { url: "http://strip.example", device: "strip.example", switch: "Outlet 1" },
      ]);
    });

    it("returns a value frozen all the way down", () => {
      assert.deepEqual(frozenEverywhere(loaded), []);
      assert.throws(() => {
        (loaded.pool.groups[0]?.template.labels as Record<string, string>)["example.com/pool"] = "other";
      }, TypeError);
    });
  });

  describe("with plug credentials in the environment", () => {
    const env = { PLUGPOOL_PLUG_USERNAME: "plug-admin", PLUGPOOL_PLUG_PASSWORD: "hunter2-pw" };

    it("holds both, revealed only on request", () => {
      const { credentials } = esphomePlugs(load(config(), env))[0] ?? {};
      assert.ok(credentials);
      assert.equal(credentials.username.reveal(), "plug-admin");
      assert.equal(credentials.password.reveal(), "hunter2-pw");
    });

    it("never shows them in JSON or util.inspect of the whole config", () => {
      const loaded = load(config(), env);
      for (const text of [JSON.stringify(loaded), inspect(loaded, { depth: Infinity, showHidden: true }), String(esphomePlugs(loaded)[0]?.credentials?.password)]) {
        assert.ok(!text.includes("hunter2-pw"), text);
        assert.ok(!text.includes("plug-admin"), text);
      }
    });

    it("has no credentials when neither variable is set, or both are empty", () => {
      assert.equal(esphomePlugs(load(config(), {}))[0]?.credentials, undefined);
      assert.equal(esphomePlugs(load(config(), { PLUGPOOL_PLUG_USERNAME: "", PLUGPOOL_PLUG_PASSWORD: "" }))[0]?.credentials, undefined);
    });

    it("rejects a password without a username, naming the missing variable and not the value", () => {
      const issues = issuesOf(config(), { PLUGPOOL_PLUG_PASSWORD: "hunter2-pw" });
      assert.deepEqual(issues, [
        "PLUGPOOL_PLUG_USERNAME: is not set but PLUGPOOL_PLUG_PASSWORD is; plug credentials need both variables, or neither",
      ]);
    });

    it("rejects a username without a password, an empty password counting as unset", () => {
      const issues = issuesOf(config(), { PLUGPOOL_PLUG_USERNAME: "plug-admin", PLUGPOOL_PLUG_PASSWORD: "" });
      assert.deepEqual(issues, [
        "PLUGPOOL_PLUG_PASSWORD: is not set but PLUGPOOL_PLUG_USERNAME is; plug credentials need both variables, or neither",
      ]);
      assert.ok(!issues.join("\n").includes("plug-admin"));
    });
  });

  describe("with a plug's own credentials in files", () => {
    const dir = mkdtempSync(join(tmpdir(), "plugpool-credentials-"));
    after(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    const file = (name: string, content: string): string => {
      const path = join(dir, name);
      writeFileSync(path, content);
      return path;
    };
    const own = { usernameFile: file("username", "strip-admin\n"), passwordFile: file("password", "files-Pa55\n") };
    const env = { PLUGPOOL_PLUG_USERNAME: "plug-admin", PLUGPOOL_PLUG_PASSWORD: "hunter2-pw" };
    const doc = config([
      group("workers", [
        node("worker-1", { url: "http://strip.example", switch: "Outlet 1", credentials: own }),
        node("worker-2", { url: "HTTP://Strip.Example.:80", switch: "Outlet 2", credentials: own }),
        node("worker-3"),
      ]),
    ]);

    it("sends a plug's device its own credentials, without the trailing newline, and every other device the shared ones", () => {
      const loaded = load(doc, env);
      const revealed = (plug: EsphomePlug | undefined) =>
        plug?.credentials && { username: plug.credentials.username.reveal(), password: plug.credentials.password.reveal() };
      const [strip1, strip2, other] = esphomePlugs(loaded);
      assert.deepEqual(revealed(strip1), { username: "strip-admin", password: "files-Pa55" });
      assert.deepEqual(revealed(strip2), { username: "strip-admin", password: "files-Pa55" });
      assert.deepEqual(revealed(other), { username: "plug-admin", password: "hunter2-pw" });
      assert.equal(revealed(esphomePlugs(load(doc))[2]), undefined);
    });

    it("never shows them in JSON or util.inspect of the whole config", () => {
      const loaded = load(doc, env);
      for (const text of [JSON.stringify(loaded), inspect(loaded, { depth: Infinity, showHidden: true })]) {
        assert.ok(!text.includes("files-Pa55") && !text.includes("strip-admin"), text);
      }
    });

    it("rejects a file it cannot read, naming the key and never a value", () => {
      const missing = join(dir, "nope");
      const issues = issuesOf(config([group("workers", [node("worker-1", { credentials: { usernameFile: own.usernameFile, passwordFile: missing } })])]));
      assert.deepEqual(issues, ["nodeGroups[0].nodes[0].plug.credentials.passwordFile: must be the path of a readable file (no such file)"]);
      const unreadable = issuesOf(config([group("workers", [node("worker-1", { credentials: { usernameFile: dir, passwordFile: own.passwordFile } })])]));
      assert.deepEqual(unreadable, ["nodeGroups[0].nodes[0].plug.credentials.usernameFile: must be the path of a readable file (not a regular file)"]);
    });

    it("reads no FIFO, device or oversized file, which would block start-up or fill the memory", () => {
      const fifo = join(dir, "fifo");
      execFileSync("mkfifo", [fifo]);
      const big = join(dir, "big");
      writeFileSync(big, "x".repeat(65 * 1024));
      const at = (passwordFile: string) => issuesOf(config([group("workers", [node("worker-1", { credentials: { usernameFile: own.usernameFile, passwordFile } })])]));
      const key = "nodeGroups[0].nodes[0].plug.credentials.passwordFile";
      assert.deepEqual(at(fifo), [`${key}: must be the path of a readable file (not a regular file)`]);
      assert.deepEqual(at("/dev/zero"), [`${key}: must be the path of a readable file (not a regular file)`]);
      assert.deepEqual(at(big), [`${key}: must be the path of a readable file (larger than 64 KiB)`]);
    });

    it("rejects a secret written where its file's path belongs, without repeating it", () => {
      const token = "eyJhbGciOiJIUzI1NiJ9.eyJpc3MiOiJwbHVncG9vbCJ9.SECRETsig";
      const issues = issuesOf(
        config([
          group("workers", [
            node("worker-1", { credentials: { usernameFile: own.usernameFile, passwordFile: "plug-SECRETsig" } }),
            { name: "worker-2", shelly: { url: "http://10.0.0.5", passwordFile: "hunter2" } },
            { name: "worker-3", homeAssistant: { url: "http://ha.example:8123", entity: "switch.gpu_box", tokenFile: token } },
          ]),
        ]),
      );
      assert.deepEqual(issues, [
        "nodeGroups[0].nodes[0].plug.credentials.passwordFile: must be the path of a readable file (no such file)",
        "nodeGroups[0].nodes[1].shelly.passwordFile: must be the path of a readable file (no such file)",
        "nodeGroups[0].nodes[2].homeAssistant.tokenFile: must be the path of a readable file (no such file)",
      ]);
      assert.doesNotMatch(issues.join("\n"), /SECRETsig|hunter2/);
    });

    it("rejects two plugs of one device with different credentials", () => {
      const other = { usernameFile: own.usernameFile, passwordFile: file("other-password", "x") };
      const issues = issuesOf(
        config([
          group("workers", [
            node("worker-1", { url: "http://strip.example", switch: "Outlet 1", credentials: own }),
            node("worker-2", { url: "http://strip.example", switch: "Outlet 2", credentials: other }),
            node("worker-3", { url: "http://[::ffff:10.0.0.5]", switch: "Outlet 1", credentials: own }),
            node("worker-4", { url: "http://10.0.0.5", switch: "Outlet 2" }),
          ]),
        ]),
      );
      assert.deepEqual(issues, [
        "nodeGroups[0].nodes[1].plug.credentials: differ from those of nodeGroups[0].nodes[0].plug, on the same device strip.example; a device has one login, so name the same files (or none) for both",
        "nodeGroups[0].nodes[3].plug.credentials: differ from those of nodeGroups[0].nodes[2].plug, on the same device 10.0.0.5; a device has one login, so name the same files (or none) for both",
      ]);
    });

    it("rejects credentials without both files, and unknown keys", () => {
      const issues = issuesOf(config([group("workers", [node("worker-1", { credentials: { usernameFile: own.usernameFile, password: "inline" } })])]));
      assert.deepEqual(issues, [
        "nodeGroups[0].nodes[0].plug.credentials.passwordFile: is required",
        "nodeGroups[0].nodes[0].plug.credentials.password: unknown key (did you mean passwordFile?)",
      ]);
      assert.ok(!issues.join("\n").includes("inline"));
    });
  });

  describe("with text that is not valid YAML", () => {
    it("names the line and column of the syntax error", () => {
      assert.deepEqual(issuesOf('providerIDPrefix: "k3s://"\nlisten: a: b\nnodeGroups: []\n'), ["line 2, column 9: YAML syntax error: a mapping where a single value belongs (check the indentation, or quote a value holding \": \") (BLOCK_AS_IMPLICIT_KEY)"]);
    });

    it("does not quote the offending line, which may hold a credential", () => {
      const issues = issuesOf('providerIDPrefix: "k3s://"\nurl: "http://admin:hunter2@plug\n');
      assert.ok(!issues.join("\n").includes("hunter2"), issues.join("\n"));
    });

    it("tells a fault by line, column and yaml's error code, never by source text the message would quote", () => {
      const at = (value: string) => issuesOf(`providerIDPrefix: "k3s://"\nnodeGroups: []\npasswordFile: ${value}\n`);
      assert.deepEqual(at("|Hunter2"), ["line 3, column 16: YAML syntax error: a character that does not belong there (quote the value) (UNEXPECTED_TOKEN)"]);
      assert.deepEqual(at(">Hunter2"), ["line 3, column 16: YAML syntax error: a character that does not belong there (quote the value) (UNEXPECTED_TOKEN)"]);
      assert.deepEqual(at("*Hunter2"), ["line 3, column 15: YAML error: an alias (*name) names no anchor (&name) set before it"]);
    });

    it("rejects a key given twice in one mapping", () => {
      const issues = issuesOf('providerIDPrefix: "k3s://"\nproviderIDPrefix: "x://"\nnodeGroups: []\n');
      assert.deepEqual(issues, ["line 2, column 1: YAML syntax error: a key given twice in one mapping (DUPLICATE_KEY)"]);
    });

    it("rejects a file with more than one document", () => {
      assert.deepEqual(issuesOf("providerIDPrefix: a\n---\nproviderIDPrefix: b\n"), [
        "line 2, column 1: YAML syntax error: more than one YAML document (the file must hold a single one) (MULTIPLE_DOCS)",
      ]);
    });

    it("rejects aliases that expand without bound", () => {
      const lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"];
      for (let i = 1; i < 9; i++) lines.push(`a${i}: &a${i} [${Array<string>(10).fill(`*a${i - 1}`).join(", ")}]`);
      assert.deepEqual(issuesOf(lines.join("\n")), [
        "(top level): cannot read the YAML: Excessive alias count indicates a resource exhaustion attack",
      ]);
    });

    it("rejects an empty file, saying what is required", () => {
      assert.deepEqual(issuesOf("# nothing here\n"), [
        "(top level): the configuration is empty; providerIDPrefix and nodeGroups are required",
      ]);
    });

    it("rejects a document that is not a mapping", () => {
      assert.deepEqual(issuesOf("- a\n- b\n"), ["(top level): must be a mapping, not a list"]);
    });
  });

  describe("when it rejects", () => {
    it("throws a ConfigError whose message lists every issue, one per line, in file order", () => {
      let caught: unknown;
      try {
        loadConfig('providerIDPrefix: x\nlisten: 0.0.0.0:8086\npowerOf: {}\nnodeGroups: []\n', { PLUGPOOL_PLUG_PASSWORD: "pw" });
      } catch (error) {
        caught = error;
      }
      assert.ok(caught instanceof ConfigError);
      assert.equal(caught.name, "ConfigError");
      assert.deepEqual(caught.issues, [
        "listen: host 0.0.0.0 is not loopback; without tls, listen on 127.0.0.1, ::1 or localhost (cluster-autoscaler runs in the same pod)",
        "powerOf: unknown key (did you mean powerOff?)",
        "nodeGroups: must list at least one entry",
        "PLUGPOOL_PLUG_USERNAME: is not set but PLUGPOOL_PLUG_PASSWORD is; plug credentials need both variables, or neither",
      ]);
      assert.equal(caught.message, caught.issues.join("\n"));
    });
  });
});

describe("ConfigError", () => {
  it("removes the userinfo of any URL in an issue", () => {
    const error = new ConfigError(["a: see http://admin:pa55@plug.example and https://token@x.example/"]);
    assert.deepEqual(error.issues, ["a: see http://[redacted]@plug.example and https://[redacted]@x.example/"]);
    assert.ok(!error.message.includes("pa55"));
  });
});

describe("loadConfigFile()", () => {
  it("loads a file", () => {
    assert.equal(loadConfigFile(fixture("every-key.yaml"), {}).pool.providerIDPrefix, "metal://");
  });

  it("rejects a missing file, naming its path", () => {
    const path = fixture("no-such-config.yaml");
    assert.throws(() => loadConfigFile(path, {}), (error: unknown) => {
      assert.ok(error instanceof ConfigError);
      assert.deepEqual(error.issues, [`${path}: cannot read the configuration file (no such file)`]);
      return true;
    });
  });

  it("rejects a directory, naming its path", () => {
    const path = fixture("");
    assert.throws(() => loadConfigFile(path, {}), (error: unknown) => {
      assert.ok(error instanceof ConfigError);
      assert.deepEqual(error.issues, [`${path}: cannot read the configuration file (is a directory)`]);
      return true;
    });
  });
});
