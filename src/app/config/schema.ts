// The configuration's JSON Schema: the file's shape (schema.json) with each power backend's section among a
// node's keys. Which one a node names, and that it names exactly one, is checked with the values.
import { BACKENDS } from "../power/backends.ts";
import shape from "./schema.json" with { type: "json" };

function compose(): Readonly<Record<string, unknown>> {
  const node = shape.$defs.node;
  const sections = Object.fromEntries(BACKENDS.map((b) => [b.section, b.schema]));
  return { ...shape, $defs: { ...shape.$defs, node: { ...node, properties: { ...node.properties, ...sections } } } };
}

export const CONFIG_SCHEMA = compose();
