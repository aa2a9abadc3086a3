import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import type { Machine } from "../../src/domain/model.ts";
import { claimsNoMachine, createMachineIndex, foreignProviderID, matchedNode, resolveRef, safetyNodes } from "../../src/domain/matching.ts";
import { PREFIX, World } from "../harness/fakes/world.ts";

describe("matching", () => {
  describe("matchedNode()", () => {
    it("matches a Node whose providerID is the prefix plus the machine name, whatever its name", () => {
      const w = new World();
      w.cluster.addNode({ name: "renamed", providerID: PREFIX + "worker-1" });
      assert.equal(matchedNode(w.cluster, PREFIX, w.machine("worker-1"))?.name, "renamed");
    });

    it("matches by name a Node without providerID", () => {
      const w = new World();
      w.cluster.addNode({ name: "worker-1" });
      assert.equal(matchedNode(w.cluster, PREFIX, w.machine("worker-1"))?.name, "worker-1");
    });

    it("does not match a Node named like the machine whose providerID has another form", () => {
      const w = new World();
      w.cluster.addNode({ name: "worker-1", providerID: "aws:///eu-west-1a/i-1" });
      assert.equal(matchedNode(w.cluster, PREFIX, w.machine("worker-1")), undefined);
      assert.equal(foreignProviderID(w.cluster, PREFIX, w.machine("worker-1")), "aws:///eu-west-1a/i-1");
    });
  });

  describe("foreignProviderID()", () => {
    it("names nothing when no Node carries the machine's name, or the one that does has no providerID or the machine's own", () => {
      const w = new World();
      assert.equal(foreignProviderID(w.cluster, PREFIX, w.machine("worker-1")), undefined, "no Node");
      w.cluster.addNode({ name: "worker-1" });
      assert.equal(foreignProviderID(w.cluster, PREFIX, w.machine("worker-1")), undefined, "no providerID");
      w.cluster.addNode({ name: "worker-2", providerID: PREFIX + "worker-2" });
      assert.equal(foreignProviderID(w.cluster, PREFIX, w.machine("worker-2")), undefined, "the machine's own providerID");
    });
  });

  describe("claimsNoMachine()", () => {
    const w = new World();
    const machines = w.machines();
    const node = (name: string, providerID: string) => w.cluster.addNode({ name, providerID });

    it("takes a Node carrying a machine's name as claiming it, whatever its providerID", () => {
      assert.equal(claimsNoMachine(node("worker-1", "aws:///eu-west-1a/i-1"), machines, PREFIX), false);
    });

    it("takes a Node carrying a machine's instance id as claiming it, whatever its name", () => {
      assert.equal(claimsNoMachine(node("renamed-host", PREFIX + "worker-2"), machines, PREFIX), false);
    });

    it("finds a Node with another name and another providerID claiming no machine", () => {
      assert.equal(claimsNoMachine(node("stranger", PREFIX + "stranger"), machines, PREFIX), true);
    });
  });

  describe("safetyNodes()", () => {
    it("counts a Node carrying the machine's name whatever its providerID", () => {
      const w = new World();
      w.cluster.addNode({ name: "worker-1", providerID: "aws:///i-1" });
      assert.deepEqual(
        safetyNodes(w.cluster, PREFIX, w.machine("worker-1")).map((n) => n.name),
        ["worker-1"],
      );
    });

    it("returns both Nodes when one matches by providerID and another carries the name", () => {
      const w = new World();
      w.cluster.addNode({ name: "other", providerID: PREFIX + "worker-1" });
      w.cluster.addNode({ name: "worker-1", providerID: "foreign://x" });
      assert.deepEqual(
        safetyNodes(w.cluster, PREFIX, w.machine("worker-1")).map((n) => n.name),
        ["other", "worker-1"],
      );
    });

    it("is empty for a machine no Node stands for", () => {
      const w = new World();
      assert.deepEqual(safetyNodes(w.cluster, PREFIX, w.machine("worker-1")), []);
    });
  });

  describe("resolveRef()", () => {
    const w = new World();
    const machines = w.machines();

    it("resolves a real Node by providerID", () => {
      assert.equal(resolveRef(machines, PREFIX, w.ref("worker-2"))?.name, "worker-2");
    });

    it("resolves a fake node whose name, providerID and instance id are the same", () => {
      assert.equal(resolveRef(machines, PREFIX, w.fakeRef("worker-3"))?.name, "worker-3");
    });

    it("resolves by name only when the ref has no providerID", () => {
      assert.equal(resolveRef(machines, PREFIX, { name: "worker-1", providerID: "" })?.name, "worker-1");
      assert.equal(resolveRef(machines, PREFIX, { name: PREFIX + "worker-1", providerID: "" })?.name, "worker-1");
      assert.equal(resolveRef(machines, PREFIX, { name: "worker-1", providerID: "aws:///i-1" }), undefined);
    });

    it("resolves nothing for a node that is not a machine", () => {
      assert.equal(resolveRef(machines, PREFIX, { name: "control-plane", providerID: PREFIX + "control-plane" }), undefined);
    });
  });

  describe("createMachineIndex()", () => {
    it("resolves every ref to the machine resolveRef finds, ties and names that look like instance ids included", () => {
      const template = new World().machine("worker-1");
      // Few letters, so that names collide with each other and with instance ids ("k3s://a" named machines).
      const name = fc.oneof(fc.constantFrom("a", "b", "c", "worker-1"), fc.constantFrom("a", "b").map((n) => PREFIX + n));
      const ref = fc.record({ name: fc.oneof(name, fc.constant("")), providerID: fc.oneof(fc.constant(""), name, name.map((n) => PREFIX + n)) });
      fc.assert(
        fc.property(fc.array(name, { maxLength: 6 }), fc.array(ref, { minLength: 1, maxLength: 8 }), (names, refs) => {
          const list: Machine[] = names.map((n, i) => ({ ...template, name: n, index: i }));
          const index = createMachineIndex(list, PREFIX);
          for (const r of refs) assert.equal(index.resolve(r), resolveRef(list, PREFIX, r));
        }),
      );
    });
  });

  describe("Pool.nodeGroupForNode()", () => {
    it("answers the group of a matched node and undefined for a node that is not ours", () => {
      const w = new World({
        groups: [
          { id: "small", machines: ["s-1"] },
          { id: "big", machines: ["b-1", "b-2"] },
        ],
      });
      assert.equal(w.pool.nodeGroupForNode(w.ref("b-2"))?.id, "big");
      assert.equal(w.pool.nodeGroupForNode(w.fakeRef("s-1"))?.id, "small");
      assert.equal(w.pool.nodeGroupForNode({ name: "cp", providerID: "" }), undefined);
    });
  });
});
