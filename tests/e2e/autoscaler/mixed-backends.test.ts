// A pool that mixes power backends, driven by the real cluster-autoscaler: machines on a Shelly device, on a Home
// Assistant entity and on a Redfish BMC (the real sushy-tools emulator) are scaled up and down as one on an ESPHome
// plug is (switched on, booted, drained, shut down, cut, Nodes deleted; each meter read with the cut;
// the BMC shuts the OS down itself instead of a power-off pod), and machines switched on by hand, on each of the
// three, are never cut.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { eventually } from "../../harness/eventually.ts";
import { autoscalerMissing } from "../../harness/autoscaler/autoscaler.ts";
import { POOL_LABEL, startSite, type Site } from "../../harness/site/index.ts";
import { deleteAllPods, nodeNames, readPod, runPoolPod, scenario, warningsAbout } from "./scenario.ts";

/** CA's --max-node-provision-time here: what CA would give a machine of its own to register. */
const PROVISION_MS = 15_000;

// Skipped, with the reason, where cluster-autoscaler cannot be built (tests/harness/autoscaler/build.sh).
describe("cluster-autoscaler with plugpool: a pool that mixes power backends", { skip: autoscalerMissing() }, () => {
  let site: Site;
  const diagnostics = (): string => site.diagnostics();
  /** The Switch.Set calls the device answered, as the values of `on` asked for. */
  const switchSets = (machine: string): boolean[] =>
    site.shelly(machine).calls.filter((c) => c.rpc === "Switch.Set" && c.status === 200).map((c) => c.params.on === true);

  before(async () => {
    site = await startSite({
      machines: [
        { name: "worker-1", backend: "shelly", powerSensor: true },
        { name: "worker-2", backend: "home-assistant", powerSensor: true },
        { name: "worker-3", backend: "redfish" },
        { name: "worker-4" },
        // Boot but never register a Node.
        { name: "worker-5", backend: "shelly", neverBoots: true },
        { name: "worker-6", backend: "home-assistant", neverBoots: true },
        { name: "worker-7", backend: "redfish", neverBoots: true },
      ],
      autoscalerFlags: { "max-node-provision-time": `${PROVISION_MS / 1000}s` },
    });
  });
  after(async () => {
    await site.stop();
  });

  /** The Home Assistant service calls made for the machine's entity, as "turn_on"/"turn_off". */
  const services = (machine: string): string[] => {
    const ha = site.homeAssistant();
    return ha.hub.serviceCalls().filter((c) => c.endsWith(` switch.${ha.objectId(machine)}`)).map((c) => c.split(" ")[0]?.split(".")[1] ?? "");
  };

  /** The Reset actions the BMC answered. */
  const resets = () => site.redfish().requests().filter((r) => r.method === "POST" && r.path.endsWith("/Actions/ComputerSystem.Reset") && r.status < 300);
  const stepDetail = (machine: string, step: string): string =>
    String(site.plugpool.events("power-off-step").find((e) => e.machine === machine && e.step === step && e.outcome === "done")?.detail ?? "");

  /** A pod that fits no running machine: CA scales up by one, and the pod runs on `machine`. */
  async function runBigPod(name: string, machine: string): Promise<void> {
    await site.core.createNamespacedPod({
      namespace: "default",
      body: {
        metadata: { name, labels: { app: "e2e" } },
        spec: {
          nodeSelector: { ...POOL_LABEL },
          terminationGracePeriodSeconds: 0,
          containers: [{ name: "app", image: "registry.k8s.io/pause:3.10", resources: { requests: { cpu: "3500m" } } }],
        },
      },
    });
    await eventually(`pod ${name} Running on ${machine}`, async () => {
      const pod = await readPod(site.core, name);
      assert.equal(pod.status?.phase, "Running");
      assert.equal(pod.spec?.nodeName, machine);
    }, 90_000, 250);
  }

  it("scales machines on a Shelly device, a Home Assistant entity and a Redfish BMC up for pending pods and down once they are gone", scenario("Shelly, Home Assistant and Redfish up and down", diagnostics, async () => {
    const first = await runPoolPod(site.core, "small");
    assert.equal(first, "worker-1", "the first machine in config order, on its Shelly device");
    assert.deepEqual(switchSets("worker-1"), [true]);
    // Pods too big for what runs: CA asks for one more each time, the next in config order.
    await runBigPod("big", "worker-2");
    assert.deepEqual(services("worker-2"), ["turn_on"]);
    assert.deepEqual(site.history("worker-2"), ["booting", "running"]);
    await runBigPod("bigger", "worker-3");
    assert.equal(resets().length, 1, "one Reset (On) reached the BMC");
    assert.deepEqual(site.history("worker-3"), ["booting", "running"]);
    assert.equal(site.powered("worker-4"), false, "the ESPHome-powered machine stays off");

    await deleteAllPods(site.core);
    await eventually("worker-1, worker-2 and worker-3 cut and their Nodes deleted", async () => {
      for (const machine of ["worker-1", "worker-2", "worker-3"]) assert.equal(site.powered(machine), false, machine);
      assert.deepEqual(await nodeNames(site.core), []);
    }, 120_000, 250);
    assert.deepEqual(switchSets("worker-1"), [true, false]);
    assert.deepEqual(services("worker-2"), ["turn_on", "turn_off"]);
    // The BMC's GracefulShutdown took the OS (and, on this emulator, the power) down: no power-off pod ran.
    assert.ok(resets().length >= 2, `Reset On, then GracefulShutdown (and ForceOff, unless already off): ${resets().length}`);
    assert.match(stepDetail("worker-3", "power-off-pod"), /OS shutdown of worker-3 requested through/);
    assert.deepEqual(site.history("worker-3").slice(2), ["off"]);
    assert.ok(site.plugpool.events("node-deleted").some((e) => e.machine === "worker-3"));
    for (const machine of ["worker-1", "worker-2"]) {
      assert.match(stepDetail(machine, "power-off-pod"), /power-off pod created/);
      assert.deepEqual(site.history(machine).slice(2), ["shutting-down", "halted", "off"]);
      const cut = site.plugpool.events("plug-off").find((e) => e.machine === machine);
      // The draw at that moment depends on how far the simulated shutdown got when the grace ended; that the
      // backend's meter was read and reported with the cut is what this pool shows.
      assert.equal(typeof cut?.watts, "number", `${machine}'s meter read with the cut: ${JSON.stringify(cut)}`);
    }
    assert.deepEqual(site.plugpool.events("refused"), []);
  }));

  it("never cuts a machine on a Shelly device, a Home Assistant entity or a Redfish BMC switched on by hand that has no Node", scenario("switched on by hand", diagnostics, async () => {
    await eventually("all three read by plugpool", () => {
      assert.ok(site.shelly("worker-5").calls.some((c) => c.rpc === "Switch.GetStatus" && c.status === 200));
      assert.ok(site.homeAssistant().hub.calls.some((c) => c.path.endsWith("/switch.worker_6") && c.status === 200));
      assert.ok(site.redfish().requests().some((r) => r.method === "GET" && r.path.endsWith("/Systems/worker-7") && r.status === 200));
    }, 20_000);
    site.shelly("worker-5").flip(0, true);
    await site.homeAssistant().hub.setSwitch("worker_6", true);
    await site.redfish().setPower("worker-7", "On");
    const resetsBefore = resets().length;
    const loopsBefore = site.caLog(/Autoscaler loop triggered/).length;
    await sleep(PROVISION_MS);
    await eventually("three more CA loops after the provisioning timeout", () => {
      assert.ok(site.caLog(/Autoscaler loop triggered/).length >= loopsBefore + 3);
    }, 30_000, 250);
    assert.deepEqual(switchSets("worker-5"), [], "no Switch.Set ever reached the Shelly device");
    assert.deepEqual(services("worker-6"), [], "no service was called for the Home Assistant entity");
    assert.deepEqual(resets().slice(resetsBefore).map((r) => r.path), [], "no Reset reached the BMC");
    assert.equal(await site.redfish().powerState("worker-7"), "On");
    assert.equal(site.powered("worker-5"), true);
    assert.equal(site.powered("worker-6"), true);
    const { response } = await site.client.call("nodeGroupNodes", { id: "workers" });
    assert.deepEqual(response?.instances.map((i) => i.id), [], "no instance for CA");
    for (const machine of ["worker-5", "worker-6", "worker-7"]) {
      assert.notDeepEqual(await warningsAbout(site.core, "PoweredOutside", machine), [], `a PoweredOutside Warning about ${machine}`);
    }
  }));
});
