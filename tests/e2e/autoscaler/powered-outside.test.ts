// Machines powered outside plugpool, with the real cluster-autoscaler beside it: a plug switched on by hand, with
// no Node that plugpool can match, is not an instance for CA, is reported once as a PoweredOutside Warning, and is
// never switched off, however long it stays without a Node. plugpool cuts only what it switched on itself.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { eventually } from "../../harness/eventually.ts";
import { autoscalerMissing } from "../../harness/autoscaler/autoscaler.ts";
import { PREFIX, startSite, type Site } from "../../harness/site/index.ts";
import { scenario, turnOffRequests, warningsAbout } from "./scenario.ts";

/** CA's --max-node-provision-time here: what CA would give a machine of its own to register. */
const PROVISION_MS = 15_000;

// Skipped, with the reason, where cluster-autoscaler cannot be built (tests/harness/autoscaler/build.sh).
describe("cluster-autoscaler with plugpool: machines powered outside plugpool", { skip: autoscalerMissing() }, () => {
  let site: Site;
  const diagnostics = (): string => site.diagnostics();
  const loops = (): number => site.caLog(/Autoscaler loop triggered/).length;

  before(async () => {
    site = await startSite({
      machines: [
        // Boots but never registers a Node.
        { name: "worker-1", neverBoots: true },
        // Its kubelet is configured with a typo: Node wroker-2, providerID k3s://wroker-2.
        { name: "worker-2", nodeName: "wroker-2" },
        { name: "worker-3" },
      ],
      autoscalerFlags: {
        "max-node-provision-time": `${PROVISION_MS / 1000}s`,
        "initial-node-group-backoff-duration": "5s",
      },
    });
  });
  after(async () => {
    await site.stop();
  });

  /** Switches the machine's plug on by hand, once plugpool has read it off. */
  async function switchOnByHand(machine: string): Promise<number> {
    await eventually(`${machine}'s plug read by plugpool`, () => {
      assert.ok(site.plug(machine).calls.some((c) => c.status === 200));
    }, 20_000);
    site.plug(machine).setState("Relay", true);
    return performance.now();
  }

  /** Waits past CA's provisioning timeout since `since`, and then three more CA loops. */
  async function outlastProvisioning(since: number): Promise<void> {
    await sleep(Math.max(0, since + PROVISION_MS - performance.now()));
    const loopsBefore = loops();
    await eventually("three more CA loops after the provisioning timeout", () => {
      assert.ok(loops() >= loopsBefore + 3, `${loops() - loopsBefore} loops`);
    }, 30_000, 250);
  }

  /** What CA must never have seen or done about the machine, that its plug is still on, and that it was reported. */
  async function assertLeftAlone(machine: string): Promise<void> {
    assert.deepEqual(turnOffRequests(site.plug(machine)), [], `no switch-off ever reached ${machine}'s plug`);
    assert.equal(site.plug(machine).state("Relay"), true);
    const { response, error } = await site.client.call("nodeGroupNodes", { id: "workers" });
    assert.equal(error, undefined);
    assert.deepEqual(response?.instances.map((i) => i.id), [], "no instance for CA");
    const target = await site.client.call("nodeGroupTargetSize", { id: "workers" });
    assert.equal(target.response?.targetSize, 0);
    assert.deepEqual(site.caLog(new RegExp(`${PREFIX}${machine}\\b`)), [], "CA never named the machine");
    assert.deepEqual(site.caLog(/unregistered node/), []);
    assert.ok(site.autoscaler.running());
    assert.notDeepEqual(await warningsAbout(site.core, "PoweredOutside", machine), [], `a PoweredOutside Warning about ${machine}`);
  }

  it("never switches off, nor shows CA, a machine switched on by hand that has no Node", scenario("switched on by hand, no Node", diagnostics, async () => {
    const machine = "worker-1";
    const switchedOn = await switchOnByHand(machine);
    await outlastProvisioning(switchedOn);
    await assertLeftAlone(machine);
    assert.equal(site.machines.state(machine), "booting", "still powered, never registered");
    assert.deepEqual(site.history(machine), ["booting"]);
  }));

  it("never switches off a machine switched on by hand whose Node registered under a typo'd name", scenario("Node under a typo'd name", diagnostics, async () => {
    const machine = "worker-2";
    const switchedOn = await switchOnByHand(machine);
    await eventually("Node wroker-2 registered and Ready", async () => {
      const node = await site.core.readNode({ name: "wroker-2" });
      assert.equal(node.spec?.providerID, `${PREFIX}wroker-2`);
      assert.ok(node.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"));
    }, 30_000, 250);
    await outlastProvisioning(switchedOn);
    await assertLeftAlone(machine);
    assert.equal(site.machines.state(machine), "running");
    assert.deepEqual(site.history(machine), ["booting", "running"]);
    const group = await site.client.call("nodeGroupForNode", { node: { name: "wroker-2", providerID: `${PREFIX}wroker-2` } });
    assert.equal(group.error, undefined);
    assert.equal(group.response?.nodeGroup?.id ?? "", "", "Node wroker-2 belongs to no group");
  }));
});
