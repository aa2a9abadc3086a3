// `doctor` compares what each device answers as now with what plugpool expects of it: a device that answers as
// another fails its row with the one fix, and two devices that answer alike are a warning. Here the apiserver
// cannot be reached, so only the pinned identities are known.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { KubeConfig } from "@kubernetes/client-node";
import { doctor } from "../../src/app/doctor.ts";
import type { BackendProbe } from "../../src/adapters/power-backend.ts";
import type { PowerControl } from "../../src/domain/index.ts";
import { config, group, load, node } from "./fixtures/config-builders.ts";

function unreachableCluster(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "none", server: "https://127.0.0.1:1", skipTLSVerify: true }],
    users: [{ name: "none", token: "t" }],
    contexts: [{ name: "none", cluster: "none", user: "none" }],
    currentContext: "none",
  });
  return kc;
}

/** Each control answers on, as the identity given for the machine whose plug URL names it. */
function answering(identities: Readonly<Record<string, string>>): (control: PowerControl) => Promise<BackendProbe> {
  return (control) => {
    const machine = Object.keys(identities).find((m) => control.label.includes(`${m}.plug.example`));
    const id = machine === undefined ? undefined : identities[machine];
    return Promise.resolve({ state: "on", detail: "emulated", ...(id === undefined ? {} : { identity: { id } }) });
  };
}

describe("doctor: device identities", () => {
  it("fails a device that answers as another than pinned, naming both and the fix; passes one that answers as pinned", async () => {
    const doc = config([
      group("workers", [
        node("worker-1", {}, { deviceIdentity: 'name "plug-1"' }),
        node("worker-2", {}, { deviceIdentity: 'name "plug-2"' }),
        node("worker-3"),
      ]),
    ]);
    const report = await doctor(load(doc), {
      kubeConfig: unreachableCluster(),
      probe: answering({ "worker-1": 'name "plug-1"', "worker-2": 'name "plug-9"', "worker-3": 'name "plug-3"' }),
    });
    const rows = new Map(report.rows.filter((r) => r.area === "device").map((r) => [r.subject, r]));
    assert.equal(rows.get("device of worker-1")?.status, "ok");
    assert.equal(rows.get("device of worker-2")?.status, "FAIL");
    assert.equal(
      rows.get("device of worker-2")?.detail,
      'answers as name "plug-9", but plugpool knows it as name "plug-2" (pinned): nothing is switched and worker-2 is held; fix the address, or if the device was replaced set deviceIdentity: "name \\"plug-9\\"" on the node',
    );
    assert.equal(rows.get("device of worker-3")?.status, "warn", "learned identities could not be read");
    assert.equal(report.ok, false);
  });

  it("warns about two devices that answer alike: plugpool cannot tell them apart", async () => {
    const doc = config([group("workers", [node("worker-1"), node("worker-2")])]);
    const report = await doctor(load(doc), {
      kubeConfig: unreachableCluster(),
      probe: answering({ "worker-1": 'name "esphome-plug"', "worker-2": 'name "esphome-plug"' }),
    });
    const devices = report.rows.filter((r) => r.area === "device");
    assert.deepEqual(devices.map((r) => [r.subject, r.status]), [["device of worker-1", "warn"], ["device of worker-2", "warn"]]);
    assert.match(devices[0]?.detail ?? "", /as the device of worker-2 does: plugpool cannot tell them apart/);
  });

  it("warns of a deprecated key the file still uses, in a config row of its own", async () => {
    const doc = config([group("workers", [node("worker-1")])], { plugs: { timeout: "3s" } });
    const report = await doctor(load(doc), { kubeConfig: unreachableCluster(), probe: answering({ "worker-1": 'name "plug-1"' }) });
    const rows = report.rows.filter((r) => r.area === "config");
    assert.deepEqual(
      rows.map((r) => [r.status, r.detail.startsWith("plugs.timeout: deprecated, use devices.timeouts")]),
      [
        ["ok", false],
        ["warn", true],
      ],
    );
  });
});
