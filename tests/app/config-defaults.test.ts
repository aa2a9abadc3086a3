// One default per setting: the schema's `default` is what a file that leaves a key out gets. The domain keeps
// its own defaults only for an embedder that leaves an optional setting out; they must agree with the schema's.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { DEFAULT_QUARANTINE, DEFAULT_SCALE_UP } from "../../src/domain/index.ts";
import { templateNode } from "../../src/domain/template.ts";
import { config, load } from "./fixtures/config-builders.ts";

describe("defaults", () => {
  const loaded = load(config());

  it("a file without scaleUp gets the scale-up an embedder without it gets (config order, no limit)", () => {
    const { order, ...limits } = loaded.pool.scaleUp ?? assert.fail("scaleUp is always set from the file");
    assert.deepEqual(limits, DEFAULT_SCALE_UP);
    assert.equal(order, DEFAULT_SCALE_UP.order ?? "config");
  });

  it("a file without quarantine gets the quarantine an embedder without it gets", () => {
    assert.deepEqual(loaded.pool.quarantine, DEFAULT_QUARANTINE);
  });

  it("a template without arch or os claims what the domain's template node claims without those labels", () => {
    const group = loaded.pool.groups[0] ?? assert.fail("one group");
    const { "kubernetes.io/arch": arch, "kubernetes.io/os": os, ...labels } = group.template.labels;
    const bare = templateNode({ ...group, template: { ...group.template, labels } }).labels;
    assert.deepEqual({ arch, os }, { arch: bare["kubernetes.io/arch"], os: bare["kubernetes.io/os"] });
  });
});
