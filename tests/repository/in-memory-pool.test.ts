// The embedding example runs against the built package's public surface, as another tool would use it.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { promisify } from "node:util";

const example = new URL("../../examples/in-memory-pool.ts", import.meta.url).pathname;

describe("the in-memory pool example", () => {
  it("imports nothing but the plugpool/domain subpath", () => {
    const text = readFileSync(example, "utf8");
    const specifiers = [...text.matchAll(/^\s*(?:import|export)[^'"]*from\s+["']([^"']+)["']/gm)].map((m) => m[1]);
    assert.deepEqual(specifiers, ["plugpool/domain"]);
  });

  it("scales a machine up and down again, cutting its plug only after the shutdown and the grace", async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [example], { encoding: "utf8" });
    const lines = stdout.trim().split("\n");
    const at = (fragment: string) => {
      const i = lines.findIndex((l) => l.includes(fragment));
      assert.ok(i >= 0, `the example printed "${fragment}":\n${stdout}`);
      return i;
    };
    const order = [
      "pool: powered-on machine=box-1",
      'instances ["example://box-1:running"]',
      "pool: power-off-started machine=box-1",
      "site: power-off pod runs on box-1",
      "step=grace outcome=done",
      "pool: plug-off machine=box-1",
      "pool: node-deleted machine=box-1",
      "pool: power-off-finished machine=box-1",
    ].map(at);
    assert.deepEqual(order, [...order].sort((a, b) => a - b), `in that order:\n${stdout}`);
    const time = (i: number) => lines[i]?.slice(0, 8);
    assert.equal(time(at("site: power-off pod runs")), "08:32:00");
    assert.equal(time(at("pool: plug-off")), "08:34:00", "the cut waited the two-minute grace");
    assert.match(lines.at(-1) ?? "", /done: instances \[\]; plugs \{"plug-1.lan":false\}; nodes \[\]$/);
  });
});
