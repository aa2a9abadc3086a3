// Other tools import the domain as the package subpath `plugpool/domain` (the built files, as a dependency
// would get them; `npm test` builds first).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

const domainDir = new URL("../../src/domain/", import.meta.url).pathname;

describe("the plugpool/domain subpath", () => {
  it("exports the pool, the safety verdict, the error type and the constants", async () => {
    // A specifier in a variable: the compiler does not resolve it (dist/ may not be built when linting).
    const subpath: string = "plugpool/domain";
    const domain = (await import(subpath)) as Record<string, unknown>;
    for (const name of ["createPool", "mayCutPower", "isPlugpoolError", "PlugpoolError"]) {
      assert.equal(typeof domain[name], "function", name);
    }
    assert.equal(domain.TO_BE_DELETED_TAINT, "ToBeDeletedByClusterAutoscaler");
  });

  it("imports nothing from outside src/domain (no packages, no node: modules, no adapters)", () => {
    for (const file of readdirSync(domainDir).filter((f) => f.endsWith(".ts"))) {
      const text = readFileSync(join(domainDir, file), "utf8");
      for (const [, specifier] of text.matchAll(/^\s*(?:import|export)[^'"]*from\s+["']([^"']+)["']/gm)) {
        assert.match(specifier ?? "", /^\.\/[\w-]+\.ts$/, `${file} imports ${specifier ?? ""}`);
      }
    }
  });
});
