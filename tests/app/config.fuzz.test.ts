// The configuration loader facing arbitrary documents: it either loads or throws a ConfigError whose every issue
// names a path, never anything else (no crash, no stack trace).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { stringify } from "yaml";
import { ConfigError, loadConfig } from "../../src/app/config/index.ts";
import { config, group, node } from "./fixtures/config-builders.ts";

const RUNS = 400;

function outcome(text: string): "loaded" | "rejected" {
  try {
    loadConfig(text, {});
    return "loaded";
  } catch (error) {
    assert.ok(error instanceof ConfigError, `not a ConfigError: ${String(error)}`);
    assert.ok(error.issues.length > 0, "a rejection names at least one issue");
    for (const issue of error.issues) assert.match(issue, /^\S[^\n]*: \S/u, `an issue names a path: ${issue}`);
    return "rejected";
  }
}

/** Paths into the valid document where a fuzzed value is put. */
const PATHS: readonly (readonly (string | number)[])[] = [
  ["listen"],
  ["providerIDPrefix"],
  ["plugs", "timeout"],
  ["powerOff"],
  ["powerOff", "grace"],
  ["powerOff", "onShutdownTimeout"],
  ["nodeGroups", 0, "maxSize"],
  ["nodeGroups", 0, "template", "cpu"],
  ["nodeGroups", 0, "template", "labels"],
  ["nodeGroups", 0, "template", "taints"],
  ["nodeGroups", 0, "nodes", 0, "plug"],
  ["nodeGroups", 0, "nodes", 0, "plug", "url"],
  ["nodeGroups", 0, "nodes", 1, "name"],
  ["tls"],
  ["scaleUp", "maxPowerOnsPerInterval"],
];

function put(doc: Record<string, unknown>, path: readonly (string | number)[], value: unknown): Record<string, unknown> {
  const copy = structuredClone(doc);
  let at: Record<string | number, unknown> = copy;
  for (const key of path.slice(0, -1)) {
    const next = at[key];
    if (typeof next !== "object" || next === null) at[key] = {};
    at = at[key] as Record<string | number, unknown>;
  }
  at[path.at(-1) ?? ""] = value;
  return copy;
}

describe("loadConfig() fuzzed", () => {
  it("answers any YAML text with a configuration or a ConfigError naming paths", () => {
    const seen = { loaded: 0, rejected: 0 };
    fc.assert(fc.property(fc.string({ maxLength: 400 }), (text) => { seen[outcome(text)]++; }), { numRuns: RUNS });
    fc.assert(fc.property(fc.jsonValue({ maxDepth: 4 }), (value) => { seen[outcome(stringify(value))]++; }), { numRuns: RUNS });
    console.log(`config fuzz (text and JSON documents): ${2 * RUNS} runs, ${seen.loaded} loaded, ${seen.rejected} rejected`);
  });

  it("answers a valid document with any value put anywhere the same way, listing every problem", () => {
    const valid = config([group("workers", [node("worker-1"), node("worker-2")])]);
    assert.equal(outcome(stringify(valid)), "loaded");
    const seen = { loaded: 0, rejected: 0 };
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.constantFrom(...PATHS), fc.jsonValue({ maxDepth: 3 })), { minLength: 1, maxLength: 4 }), (edits) => {
        let doc = valid;
        for (const [path, value] of edits) doc = put(doc, path, value);
        seen[outcome(stringify(doc))]++;
      }),
      { numRuns: RUNS },
    );
    console.log(`config fuzz (edited valid documents): ${RUNS} runs, ${seen.loaded} loaded, ${seen.rejected} rejected`);
  });
});
