// A pool that mixes power backends, driven by the real cluster-autoscaler: a machine on a Shelly device is scaled
// up and down exactly as one on an ESPHome plug (switched on, booted, drained, shut down, its meter read at standby
// before the cut, Node deleted), and a Shelly-powered machine switched on by hand is never cut.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { eventually } from "../../support/eventually.ts";
import { autoscalerMissing } from "../../support/autoscaler/autoscaler.ts";
import { startEnvironment, type Environment } from "./environment.ts";
import { deleteAllPods, nodeNames, runPoolPod, scenario, warningsAbout } from "./scenario.ts";

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
        { name: "worker-2" },
        // Boots but never registers a Node.
        { name: "worker-3", backend: "shelly", neverBoots: true },
      ],
      autoscalerFlags: { "max-node-provision-time": `${PROVISION_MS / 1000}s` },
    });
  });
  after(async () => {
    await env.stop();
  });

  it("scales a Shelly-powered machine up for a pending pod and down once it is gone, its meter read before the cut", scenario("Shelly up and down", diagnostics, async () => {
    const node = await runPoolPod(env.core, "shelly");
    assert.equal(node, "worker-1", "the first machine in config order, on its Shelly device");
    assert.deepEqual(switchSets("worker-1"), [true]);
    assert.equal(env.powered("worker-2"), false, "the ESPHome-powered machine stays off");
    assert.deepEqual(env.history("worker-1"), ["booting", "running"]);

    await deleteAllPods(env.core);
    await eventually("worker-1 cut at its Shelly device and its Node deleted", async () => {
      assert.equal(env.powered("worker-1"), false);
      assert.deepEqual(await nodeNames(env.core), []);
    }, 90_000, 250);
    assert.deepEqual(switchSets("worker-1"), [true, false]);
    assert.deepEqual(env.history("worker-1").slice(2), ["shutting-down", "halted", "off"]);
    const cut = env.events("plug-off").find((e) => e.machine === "worker-1");
    assert.ok(typeof cut?.watts === "number" && cut.watts <= 5, `the Shelly meter read the machine at standby before the cut: ${JSON.stringify(cut)}`);
    assert.deepEqual(env.events("refused"), []);
  }));

  it("never cuts a Shelly-powered machine switched on by hand that has no Node", scenario("Shelly switched on by hand", diagnostics, async () => {
    const machine = "worker-3";
    await eventually(`${machine}'s Shelly read by plugpool`, () => {
      assert.ok(env.shelly(machine).calls.some((c) => c.rpc === "Switch.GetStatus" && c.status === 200));
    }, 20_000);
    env.shelly(machine).flip(0, true);
    const loopsBefore = env.caLog(/Autoscaler loop triggered/).length;
    await sleep(PROVISION_MS);
    await eventually("three more CA loops after the provisioning timeout", () => {
      assert.ok(env.caLog(/Autoscaler loop triggered/).length >= loopsBefore + 3);
    }, 30_000, 250);
    assert.deepEqual(switchSets(machine), [], "no Switch.Set ever reached the device");
    assert.equal(env.powered(machine), true);
    const { response } = await env.client.call("nodeGroupNodes", { id: "workers" });
    assert.deepEqual(response?.instances.map((i) => i.id), [], "no instance for CA");
    assert.notDeepEqual(await warningsAbout(env.core, "PoweredOutside", machine), [], `a PoweredOutside Warning about ${machine}`);
  }));
});
