// Rejection rules for values: template quantities, labels and taints, durations and names.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { config, group, issuesOf, load, node, withTemplate } from "./fixtures/config-builders.ts";

const QUANTITY = 'must be a Kubernetes quantity such as "24", 500m, 64Gi or 1e3';
const DURATION = "must be a duration such as 90s, 5m, 1h30m or 500ms (a number with a unit: ns, us, ms, s, m or h; no sign)";
const LABEL_KEY =
  "must be a valid label key: an optional DNS subdomain and '/', then up to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit (e.g. example.com/pool)";
const LABEL_VALUE =
  "must be a valid label value: empty, or up to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit";

describe("loadConfig() value rules", () => {
  describe("template quantities", () => {
    for (const cpu of ["64GB", "1.2.3", "", "Gi", "64 Gi", "1e", "1Ki2"]) {
      it(`rejects cpu ${JSON.stringify(cpu)} as not a quantity`, () => {
        assert.deepEqual(issuesOf(withTemplate({ cpu })), [`nodeGroups[0].template.cpu: ${QUANTITY}`]);
      });
    }

    it("rejects zero and negative cpu and memory, valid as quantities but not as capacity", () => {
      assert.deepEqual(issuesOf(withTemplate({ cpu: "-1", memory: 0 })), [
        "nodeGroups[0].template.cpu: must be more than 0 (found -1)",
        "nodeGroups[0].template.memory: must be more than 0 (found 0)",
      ]);
    });

    it("rejects a pod count that is not a whole number above 0", () => {
      assert.deepEqual(issuesOf(withTemplate({ pods: "500m" })), ['nodeGroups[0].template.pods: must be a whole number such as "110" (found 500m)']);
      assert.deepEqual(issuesOf(withTemplate({ pods: "0" })), ["nodeGroups[0].template.pods: must be more than 0 (found 0)"]);
    });

    it("accepts a whole pod count written with a suffix or exponent", () => {
      assert.equal(load(withTemplate({ pods: "1.5k" })).pool.groups[0]?.template.pods, "1.5k");
      assert.equal(load(withTemplate({ pods: "11e1" })).pool.groups[0]?.template.pods, "11e1");
    });

    it("rejects a missing cpu or memory", () => {
      assert.deepEqual(issuesOf(config([{ id: "a", maxSize: 0, template: {}, nodes: [{ name: "a-1", plug: { url: "http://a", switch: "r" } }] }])), [
        "nodeGroups[0].template.cpu: is required",
        "nodeGroups[0].template.memory: is required",
      ]);
    });

    it("rejects invalid or negative extra resources, and cpu, memory or pods among them", () => {
      const issues = issuesOf(withTemplate({ resources: { "nvidia.com/gpu": "one", "example.com/fpga": "-1", memory: "1Gi", "bad key!": "1" } }));
      assert.deepEqual(issues, [
        `nodeGroups[0].template.resources["nvidia.com/gpu"]: ${QUANTITY}`,
        'nodeGroups[0].template.resources["example.com/fpga"]: must not be negative (found -1)',
        "nodeGroups[0].template.resources.memory: set memory as template.memory, not among the extra resources",
        `nodeGroups[0].template.resources["bad key!"]: the key ${LABEL_KEY}`,
      ]);
    });

    it("accepts a zero extra resource", () => {
      assert.deepEqual(load(withTemplate({ resources: { "nvidia.com/gpu": 0 } })).pool.groups[0]?.template.resources, { "nvidia.com/gpu": "0" });
    });
  });

  describe("template labels and taints", () => {
    it("rejects invalid label keys and values", () => {
      const long = "a".repeat(64);
      const labels = { "example.com/pool": "workers", "-bad": "x", [`example.com/${long}`]: "x", "a/b/c": "x", ok: "has space", ok2: long };
      assert.deepEqual(issuesOf(withTemplate({ labels })), [
        `nodeGroups[0].template.labels["-bad"]: the key ${LABEL_KEY}`,
        `nodeGroups[0].template.labels["example.com/${long}"]: the key ${LABEL_KEY}`,
        `nodeGroups[0].template.labels["a/b/c"]: the key ${LABEL_KEY}`,
        `nodeGroups[0].template.labels.ok: ${LABEL_VALUE}`,
        `nodeGroups[0].template.labels.ok2: ${LABEL_VALUE}`,
      ]);
    });

    it("rejects an arch or os the kubelet never reports, naming the ones it does", () => {
      assert.deepEqual(issuesOf(withTemplate({ arch: "x86_64", os: "windows" })), [
        "nodeGroups[0].template.arch: must be one of amd64, arm64, arm, 386, ppc64le, s390x, riscv64, loong64",
        "nodeGroups[0].template.os: must be one of linux",
      ]);
    });

    describe("kubernetes.io/arch and kubernetes.io/os written as labels", () => {
      const labelsOf = (template: Record<string, unknown>) => load(withTemplate(template)).pool.groups[0]?.template.labels;

      it("honours a kubernetes.io/arch label as the template's arch when template.arch is not set", () => {
        assert.deepEqual(labelsOf({ labels: { "kubernetes.io/arch": "arm64", "example.com/pool": "edge" } }), {
          "example.com/pool": "edge",
          "kubernetes.io/arch": "arm64",
          "kubernetes.io/os": "linux",
        });
      });

      it("honours a kubernetes.io/os label, and the default amd64 beside it", () => {
        assert.deepEqual(labelsOf({ labels: { "kubernetes.io/os": "linux" } }), { "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux" });
      });

      it("accepts a label that says what template.arch and .os say", () => {
        assert.deepEqual(labelsOf({ arch: "arm64", os: "linux", labels: { "kubernetes.io/arch": "arm64", "kubernetes.io/os": "linux" } }), {
          "kubernetes.io/arch": "arm64",
          "kubernetes.io/os": "linux",
        });
      });

      it("refuses a label that contradicts template.arch, naming both", () => {
        assert.deepEqual(issuesOf(withTemplate({ arch: "arm64", labels: { "kubernetes.io/arch": "riscv64" } })), [
          'nodeGroups[0].template.labels["kubernetes.io/arch"]: is riscv64 but template.arch is arm64; write one of them, or make both say the same',
        ]);
      });

      it("refuses a label value plugpool does not support, saying what it supports", () => {
        assert.deepEqual(issuesOf(withTemplate({ labels: { "kubernetes.io/arch": "x86_64", "kubernetes.io/os": "windows" } })), [
          'nodeGroups[0].template.labels["kubernetes.io/arch"]: is x86_64; must be an architecture as the kubelet names it: one of amd64, arm64, arm, 386, ppc64le, s390x, riscv64, loong64',
          'nodeGroups[0].template.labels["kubernetes.io/os"]: is windows; must be linux: plugpool drives only Linux machines (it shuts them down with systemctl)',
        ]);
      });

      it("reports an invalid template.arch once, by the schema, whatever the label says", () => {
        assert.deepEqual(issuesOf(withTemplate({ arch: "x86_64", labels: { "kubernetes.io/arch": "amd64" } })), [
          "nodeGroups[0].template.arch: must be one of amd64, arm64, arm, 386, ppc64le, s390x, riscv64, loong64",
        ]);
      });
    });

    it("rejects a label value that is not a string", () => {
      assert.deepEqual(issuesOf(withTemplate({ labels: { gpu: true } })), ["nodeGroups[0].template.labels.gpu: must be a string, not true or false"]);
    });

    it("rejects an unknown taint effect, an invalid taint key or value, and a taint without key or effect", () => {
      const taints = [
        { key: "example.com/a", effect: "NoExecut" },
        { key: "bad key", value: "x y", effect: "NoSchedule" },
        { value: "v" },
      ];
      assert.deepEqual(issuesOf(withTemplate({ taints })), [
        "nodeGroups[0].template.taints[0].effect: must be one of NoSchedule, PreferNoSchedule, NoExecute",
        `nodeGroups[0].template.taints[1].key: ${LABEL_KEY}`,
        `nodeGroups[0].template.taints[1].value: ${LABEL_VALUE}`,
        "nodeGroups[0].template.taints[2].key: is required",
        "nodeGroups[0].template.taints[2].effect: is required",
      ]);
    });
  });

  describe("durations", () => {
    for (const grace of ["5", "5 m", "-1s", "1d", "", "1H", "1h 30m"]) {
      it(`rejects grace ${JSON.stringify(grace)}`, () => {
        assert.deepEqual(issuesOf(config(undefined, { powerOff: { grace } })), [`powerOff.grace: ${DURATION}`]);
      });
    }

    it("rejects a duration written as a bare YAML number", () => {
      assert.deepEqual(issuesOf(config(undefined, { powerOff: { standbyWindow: 20 } })), ["powerOff.standbyWindow: must be a string, not a whole number"]);
    });

    it("reads Go-style durations", () => {
      const loaded = load(config(undefined, { powerOff: { notReadyTimeout: "1h30m", grace: "1s", standbyWindow: "1.5s" }, devices: { timeouts: { plug: "500ms" } } }));
      assert.deepEqual(
        [loaded.pool.powerOff.notReadyTimeoutMs, loaded.pool.powerOff.graceMs, loaded.pool.powerOff.standbyWindowMs, loaded.deviceTimeoutsMs.get("esphome")],
        [5_400_000, 1_000, 1_500, 500],
      );
    });

    it("gives each kind of device its own timeout: the one devices.timeouts names, else its default", () => {
      const loaded = load(config(undefined, { devices: { timeouts: { redfish: "25s" } } }));
      assert.deepEqual(Object.fromEntries(loaded.deviceTimeoutsMs), { esphome: 2_000, shelly: 2_000, "home-assistant": 4_000, redfish: 25_000 });
      assert.deepEqual(loaded.warnings, []);
    });

    it("rejects a device timeout of 0 or above 30s, and accepts 30s", () => {
      const expected = "devices.timeouts.redfish: must be more than 0 and at most 30s";
      assert.deepEqual(issuesOf(config(undefined, { devices: { timeouts: { redfish: "0s" } } })), [expected]);
      assert.deepEqual(issuesOf(config(undefined, { devices: { timeouts: { redfish: "30001ms" } } })), [expected]);
      assert.equal(load(config(undefined, { devices: { timeouts: { redfish: "30s" } } })).deviceTimeoutsMs.get("redfish"), 30_000);
    });

    it("rejects a kind of device it does not know under devices.timeouts, naming the key", () => {
      assert.deepEqual(issuesOf(config(undefined, { devices: { timeouts: { tasmota: "2s" } } })), [
        "devices.timeouts.tasmota: unknown key (expected one of plug, shelly, homeAssistant, redfish)",
      ]);
    });

    it("still reads the deprecated plugs.timeout, for every kind devices.timeouts does not name, and warns", () => {
      const loaded = load(config(undefined, { plugs: { timeout: "3s" }, devices: { timeouts: { redfish: "12s" } } }));
      assert.deepEqual(Object.fromEntries(loaded.deviceTimeoutsMs), { esphome: 3_000, shelly: 3_000, "home-assistant": 3_000, redfish: 12_000 });
      assert.deepEqual(loaded.warnings, [
        "plugs.timeout: deprecated, use devices.timeouts; until then it is the timeout of every kind of device that devices.timeouts does not name (plug, shelly, homeAssistant, redfish)",
      ]);
      assert.deepEqual(issuesOf(config(undefined, { plugs: { timeout: "0s" } })), ["plugs.timeout: must be more than 0 and at most 30s"]);
    });

    it("refuses timings that would make the power-off meaningless: the pod and the cut in one pass", () => {
      assert.deepEqual(issuesOf(config(undefined, { powerOff: { notReadyTimeout: "1ns", grace: "0" } })), [
        "powerOff.notReadyTimeout: must be at least 10s: the OS needs time to shut down before the node goes NotReady",
        "powerOff.grace: must be at least 1s",
      ]);
      assert.equal(load(config(undefined, { powerOff: { notReadyTimeout: "10s", grace: "1s" } })).pool.powerOff.notReadyTimeoutMs, 10_000);
    });

    it("keeps the power after a shutdown timeout unless told to cut", () => {
      assert.equal(load(config()).pool.powerOff.onShutdownTimeout, "keep-power");
      assert.equal(load(config(undefined, { powerOff: { onShutdownTimeout: "cut" } })).pool.powerOff.onShutdownTimeout, "cut");
      assert.equal(issuesOf(config(undefined, { powerOff: { onShutdownTimeout: "yes" } })).length, 1);
    });
  });

  describe("scale-up and quarantine settings", () => {
    it("rejects a power-on count that is negative, fractional or not a number", () => {
      assert.deepEqual(issuesOf(config(undefined, { scaleUp: { maxPowerOnsPerInterval: -1 } })), [
        "scaleUp.maxPowerOnsPerInterval: must not be negative (found -1)",
      ]);
      assert.deepEqual(issuesOf(config(undefined, { scaleUp: { maxPowerOnsPerInterval: 1.5 } })), [
        "scaleUp.maxPowerOnsPerInterval: must be a whole number, not a number",
      ]);
      assert.deepEqual(issuesOf(config(undefined, { scaleUp: { maxPowerOnsPerInterval: "2" } })), [
        "scaleUp.maxPowerOnsPerInterval: must be a whole number, not a string",
      ]);
    });

    it("rejects a power-on interval that is not a duration, or 0", () => {
      assert.deepEqual(issuesOf(config(undefined, { scaleUp: { powerOnInterval: "10" } })), [`scaleUp.powerOnInterval: ${DURATION}`]);
      assert.deepEqual(issuesOf(config(undefined, { scaleUp: { powerOnInterval: "0s" } })), ["scaleUp.powerOnInterval: must be more than 0"]);
    });

    it("rejects quarantine durations that do not parse, and a maximum below the initial one", () => {
      assert.deepEqual(issuesOf(config(undefined, { quarantine: { initial: "10 m", max: "1d" } })), [
        `quarantine.initial: ${DURATION}`,
        `quarantine.max: ${DURATION}`,
      ]);
      assert.deepEqual(issuesOf(config(undefined, { quarantine: { initial: "6h" } })), [
        "quarantine.max: must be at least quarantine.initial (6h)",
      ]);
      assert.deepEqual(issuesOf(config(undefined, { quarantine: { initial: "5h", max: "4h" } })), [
        "quarantine.max: must be at least quarantine.initial (5h)",
      ]);
    });

    it("reads a limit with its interval, and accepts a quarantine turned off with 0", () => {
      const loaded = load(config(undefined, { scaleUp: { maxPowerOnsPerInterval: 3, powerOnInterval: "1m" }, quarantine: { initial: "0" } }));
      assert.deepEqual(loaded.pool.scaleUp, { maxPowerOnsPerInterval: 3, powerOnIntervalMs: 60_000, order: "config" });
      assert.deepEqual(loaded.pool.quarantine, { initialMs: 0, maxMs: 14_400_000 });
    });

    it("rejects an unknown scale-up order, naming the allowed ones", () => {
      assert.deepEqual(issuesOf(config(undefined, { scaleUp: { order: "cheapest" } })), [
        "scaleUp.order: must be one of config, least-used, efficient",
      ]);
    });

    it("pins a machine's device identity, and rejects one pinned for two machines", () => {
      const pinned = load(config([group("workers", [node("worker-1", {}, { deviceIdentity: 'name "plug-1"' }), node("worker-2")])]));
      assert.deepEqual(pinned.pool.groups[0]?.machines.map((m) => m.power.identity), ['name "plug-1"', undefined]);
      const twice = config([group("workers", [node("worker-1", {}, { deviceIdentity: 'name "plug"' }), node("worker-2", {}, { deviceIdentity: 'name "plug"' })])]);
      assert.deepEqual(issuesOf(twice), [
        "nodeGroups[0].nodes[1].deviceIdentity: is also pinned at nodeGroups[0].nodes[0].deviceIdentity; two machines cannot be powered by one device (give each device a name of its own, and pin that)",
      ]);
      assert.deepEqual(issuesOf(config([group("workers", [node("worker-1", {}, { deviceIdentity: "" })])])), [
        "nodeGroups[0].nodes[0].deviceIdentity: must not be empty",
      ]);
    });

    it("rejects order efficient when no group or node sets idleWatts, and accepts it when one does", () => {
      assert.deepEqual(issuesOf(config(undefined, { scaleUp: { order: "efficient" } })), [
        "scaleUp.order: efficient orders machines by idleWatts, but no group or node sets idleWatts; set it, or use config or least-used",
      ]);
      const onNode = config([group("workers", [node("worker-1"), node("worker-2", {}, { idleWatts: 12 })])], { scaleUp: { order: "efficient" } });
      assert.equal(load(onNode).pool.scaleUp?.order, "efficient");
    });

    it("rejects idleWatts that are negative or not a number, on a group and on a node", () => {
      const doc = config([group("workers", [node("worker-1", {}, { idleWatts: "20W" })], { idleWatts: -3 })]);
      // In file order: the builder writes the group's idleWatts after its nodes.
      assert.deepEqual(issuesOf(doc), [
        "nodeGroups[0].nodes[0].idleWatts: must be a number, not a string",
        "nodeGroups[0].idleWatts: must not be negative (found -3)",
      ]);
      const infinite = "providerIDPrefix: k3s://\nnodeGroups:\n  - { id: w, maxSize: 1, idleWatts: .inf, template: { cpu: '1', memory: 1Gi }, nodes: [{ name: w-1, plug: { url: 'http://w', switch: r } }] }\n";
      assert.equal(issuesOf(infinite).length, 1);
      assert.match(issuesOf(infinite)[0] ?? "", /^nodeGroups\[0\]\.idleWatts: /);
    });

    it("rejects unknown keys in either section", () => {
      assert.deepEqual(issuesOf(config(undefined, { scaleUp: { maxPowerOns: 2 }, quarantine: { maximum: "1h" } })), [
        "scaleUp.maxPowerOns: unknown key (did you mean maxPowerOnsPerInterval?)",
        "quarantine.maximum: unknown key (expected one of initial, max)",
      ]);
    });
  });

  describe("power-off settings and the GPU label", () => {
    it("rejects a namespace that is not a DNS label, an image with spaces and negative standby watts", () => {
      assert.deepEqual(issuesOf(config(undefined, { powerOff: { namespace: "Plug_Pool", image: "busybox 1.37", standbyWatts: -1 } })), [
        "powerOff.namespace: must be up to 63 lower-case letters, digits or '-', starting and ending with a letter or digit",
        "powerOff.image: must be a container image reference such as busybox:1.37.0 (not empty, no spaces)",
        "powerOff.standbyWatts: must not be negative (found -1)",
      ]);
    });

    it("rejects a GPU label that is not a label key", () => {
      assert.deepEqual(issuesOf(config(undefined, { gpuLabel: "nvidia.com/gpu/product" })), [`gpuLabel: ${LABEL_KEY}`]);
    });
  });
});

describe("loadConfig() leaderElection", () => {
  it("follows cluster-autoscaler's default Lease in the pod's own namespace unless told otherwise", () => {
    assert.deepEqual(load(config()).leaderElection, { lease: "plugpool", followAutoscaler: { name: "cluster-autoscaler" } });
    const given = load(config(undefined, { leaderElection: { lease: "pp", followAutoscaler: { namespace: "kube-system", name: "ca" } } }));
    assert.deepEqual(given.leaderElection, { lease: "pp", followAutoscaler: { namespace: "kube-system", name: "ca" } });
  });

  it("contends whatever cluster-autoscaler does with followAutoscaler false", () => {
    assert.deepEqual(load(config(undefined, { leaderElection: { followAutoscaler: false } })).leaderElection, { lease: "plugpool", followAutoscaler: false });
  });

  it("rejects followAutoscaler true, an invalid Lease name and an unknown key, naming each", () => {
    assert.deepEqual(issuesOf(config(undefined, { leaderElection: { lease: "Not_A_Name", followAutoscaler: true, folow: 1 } })), [
      `leaderElection.lease: ${issuesOf(config(undefined, { powerOff: { namespace: "Not_A_Name" } }))[0]?.replace(/^powerOff\.namespace: /, "") ?? ""}`,
      "leaderElection.followAutoscaler: must be false or a mapping (namespace, name); leave it out to follow cluster-autoscaler's default Lease",
      "leaderElection.folow: unknown key (expected one of lease, followAutoscaler)",
    ]);
  });
});
