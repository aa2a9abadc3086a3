// The configuration's JSON Schema: the file's shape (schema.json) with each power backend's section among a
// node's keys, and its timeout among devices.timeouts. Which section a node names, and that it names exactly one,
// is checked with the values.
import { BACKENDS } from "../power/backends.ts";
import shape from "./schema.json" with { type: "json" };

function compose(): Readonly<Record<string, unknown>> {
  const node = shape.$defs.node;
  const sections = Object.fromEntries(BACKENDS.map((b) => [b.section, b.schema]));
  const { devices } = shape.properties;
  const { timeouts } = devices.properties;
  const timeout = (b: (typeof BACKENDS)[number]) => ({
    description: `Bound on one call to a device of a node's ${b.section} section, as a duration. Default ${b.defaultTimeoutMs / 1000}s.`,
    type: "string",
    format: "duration",
  });
  const perKind = { ...timeouts, properties: Object.fromEntries(BACKENDS.map((b) => [b.section, timeout(b)])) };
  return {
    ...shape,
    properties: { ...shape.properties, devices: { ...devices, properties: { ...devices.properties, timeouts: perKind } } },
    $defs: { ...shape.$defs, node: { ...node, properties: { ...node.properties, ...sections } } },
  };
}

export const CONFIG_SCHEMA = compose();
