// The schema is the reference the README copies: every key is described and states its default.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { CONFIG_SCHEMA } from "../../src/app/config/schema.ts";

interface Node {
  readonly description?: string;
  readonly default?: unknown;
  readonly $ref?: string;
  readonly properties?: Readonly<Record<string, Node>>;
  readonly items?: Node;
  readonly $defs?: Readonly<Record<string, Node>>;
}

const root = CONFIG_SCHEMA as Node;

function resolve(node: Node): Node {
  const name = node.$ref?.replace("#/$defs/", "");
  return name === undefined ? node : { ...root.$defs?.[name], ...node };
}

/** Every key of the file with its schema, by dotted path; `[]` marks list entries. */
function keys(node: Node, path: string): [string, Node][] {
  const here = resolve(node);
  const own = Object.entries(here.properties ?? {}).flatMap(([key, child]) => {
    const childPath = path === "" ? key : `${path}.${key}`;
    return [[childPath, resolve(child)] as [string, Node], ...keys(child, childPath)];
  });
  return here.items ? [...own, ...keys(here.items, `${path}[]`)] : own;
}

describe("config.schema.json", () => {
  const all = keys(root, "");

  it("reaches the keys of every level, through references and lists", () => {
    const paths = all.map(([path]) => path);
    for (const path of ["tls.cacert", "powerOff.standbyWindow", "nodeGroups[].template.taints[].effect", "nodeGroups[].nodes[].plug.powerSensor"]) {
      assert.ok(paths.includes(path), path);
    }
  });

  for (const [path, node] of all) {
    it(`describes ${path}${node.default === undefined ? "" : " and states its default"}`, () => {
      assert.ok(node.description !== undefined && node.description.length > 10, `${path} has no description`);
      if (node.default !== undefined) {
        const bare = typeof node.default === "string" ? node.default : JSON.stringify(node.default);
        const forms = [`Default ${bare}`, `Default ${JSON.stringify(node.default)}`];
        assert.ok(forms.some((f) => node.description?.includes(f)), `${path}: description does not say ${forms[1] ?? ""}`);
      }
    });
  }
});
