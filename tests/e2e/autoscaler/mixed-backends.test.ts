// A pool that mixes power backends, driven by the real cluster-autoscaler: machines on a Shelly device and on a
// Home Assistant entity are scaled up and down exactly as one on an ESPHome plug (switched on, booted, drained,
// shut down, their meters read at standby before the cut, Nodes deleted), and machines on either switched on by
// hand are never cut.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { eventually } from "../../support/eventually.ts";
import { autoscalerMissing } from "../../support/autoscaler/autoscaler.ts";
import { POOL_LABEL, startEnvironment, type Environment } from "./environment.ts";
import { deleteAllPods, nodeNames, readPod, runPoolPod, scenario, warningsAbout } from "./scenario.ts";

/** CA's --max-node-provision-time here: what CA would give a machine of its own to register. */
const PROVISION_MS = 15_000;

// Skipped, with the reason, where cluster-autoscaler cannot be built (tests/support/autoscaler/build.sh).
describe("cluster-autoscaler with plugpool: a pool that mixes power backends", { skip: autoscalerMissing() }, () => {
  let env: Environment;
  const diagnostics = (): string => env.diagnostics();
  /** The Switch.Set calls the device answered, as the values of `on` asked for. */
  const switchSets = (machine: string): boolean[] =>
    env.shelly(machine).calls.filter((c) => c.rpc === "Switch.Set" && c.status === 200).map((c) => c.params.on === true);

  before(async () => {
    env = await startEnvironment({
      machines: [
        { name: "worker-1", backend: "shelly", powerSensor: true },
        { name: "worker-2", backend: "home-assistant", powerSensor: true },
        { name: "worker-3" },
        // Boot but never register a Node.
        { name: "worker-4", backend: "shelly", neverBoots: true },
        { name: "worker-5", backend: "home-assistant", neverBoots: true },
      ],
      autoscalerFlags: { "max-node-provision-time": `${PROVISION_MS / 1000}s` },
    });
  });
  after(async () => {
    await env.stop();
  });

  /** The Home Assistant service calls made for the machine's entity, as "turn_on"/"turn_off". */
  const services = (machine: string): string[] => {
    const ha = env.homeAssistant();
    return ha.hub.serviceCalls().filter((c) => c.endsWith(` switch.${ha.objectId(machine)}`)).map((c) => c.split(" ")[0]?.split(".")[1] ?? "");
  };

  it("scales machines on a Shelly device and on a Home Assistant entity up for pending pods and down once they are gone", scenario("Shelly and Home Assistant up and down", diagnostics, async () => {
    const first = await runPoolPod(env.core, "small");
    assert.equal(first, "worker-1", "the first machine in config order, on its Shelly device");
    assert.deepEqual(switchSets("worker-1"), [true]);
    // A pod too big for what runs: CA asks for one more, the next in config order, on Home Assistant.
    await env.core.createNamespacedPod({
      namespace: "default",
      body: {
        metadata: { name: "big", labels: { app: "e2e" } },
        spec: {
          nodeSelector: { ...POOL_LABEL },
          terminationGracePeriodSeconds: 0,
          containers: [{ name: "app", image: "registry.k8s.io/pause:3.10", resources: { requests: { cpu: "3500m" } } }],
        },
      },
    });
    await eventually("pod big Running on worker-2", async () => {
      const pod = await readPod(env.core, "big");
      assert.equal(pod.status?.phase, "Running");
      assert.equal(pod.spec?.nodeName, "worker-2");
    }, 90_000, 250);
    assert.deepEqual(services("worker-2"), ["turn_on"]);
    assert.equal(env.powered("worker-3"), false, "the ESPHome-powered machine stays off");
    assert.deepEqual(env.history("worker-2"), ["booting", "running"]);

    await deleteAllPods(env.core);
    await eventually("worker-1 and worker-2 cut and their Nodes deleted", async () => {
      assert.equal(env.powered("worker-1"), false);
      assert.equal(env.powered("worker-2"), false);
      assert.deepEqual(await nodeNames(env.core), []);
    }, 120_000, 250);
    assert.deepEqual(switchSets("worker-1"), [true, false]);
    assert.deepEqual(services("worker-2"), ["turn_on", "turn_off"]);
    for (const machine of ["worker-1", "worker-2"]) {
      assert.deepEqual(env.history(machine).slice(2), ["shutting-down", "halted", "off"]);
      const cut = env.events("plug-off").find((e) => e.machine === machine);
      assert.ok(typeof cut?.watts === "number" && cut.watts <= 5, `${machine}'s meter read at standby before the cut: ${JSON.stringify(cut)}`);
    }
    assert.deepEqual(env.events("refused"), []);
  }));

  it("never cuts a machine on a Shelly device or a Home Assistant entity switched on by hand that has no Node", scenario("switched on by hand", diagnostics, async () => {
    await eventually("both read by plugpool", () => {
      assert.ok(env.shelly("worker-4").calls.some((c) => c.rpc === "Switch.GetStatus" && c.status === 200));
      assert.ok(env.homeAssistant().hub.calls.some((c) => c.path.endsWith("/switch.worker_5") && c.status === 200));
    }, 20_000);
    env.shelly("worker-4").flip(0, true);
    await env.homeAssistant().hub.setSwitch("worker_5", true);
    const loopsBefore = env.caLog(/Autoscaler loop triggered/).length;
    await sleep(PROVISION_MS);
    await eventually("three more CA loops after the provisioning timeout", () => {
      assert.ok(env.caLog(/Autoscaler loop triggered/).length >= loopsBefore + 3);
    }, 30_000, 250);
    assert.deepEqual(switchSets("worker-4"), [], "no Switch.Set ever reached the Shelly device");
    assert.deepEqual(services("worker-5"), [], "no service was called for the Home Assistant entity");
    assert.equal(env.powered("worker-4"), true);
    assert.equal(env.powered("worker-5"), true);
    const { response } = await env.client.call("nodeGroupNodes", { id: "workers" });
    assert.deepEqual(response?.instances.map((i) => i.id), [], "no instance for CA");
    for (const machine of ["worker-4", "worker-5"]) {
      assert.notDeepEqual(await warningsAbout(env.core, "PoweredOutside", machine), [], `a PoweredOutside Warning about ${machine}`);
    }
  }));
});
