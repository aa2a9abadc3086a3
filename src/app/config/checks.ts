// The one pass over the parsed file after the schema: it parses each value plugpool needs parsed (durations,
// addresses, quantities, plug URLs) and checks what the schema cannot (relations between values, duplicates,
// limits of parsed values). It runs even when the schema found problems, on every value the schema found
// nothing wrong with, so that one run reports every problem of the file; the values it parsed go to the build.
import { parseDuration } from "./duration.ts";
import { parseQuantity } from "./quantity.ts";
import { isLoopback, isWildcard, parseHostPort, PARSED_FORMATS, type HostPort } from "./formats.ts";
import { childOf, formatPath, type ConfigIssue, type ConfigPath } from "./issues.ts";
import { readFileSync, statSync } from "node:fs";
import type { DeviceTimeouts, Durations, NodeControl, ParsedConfig, ParsedGroup, ParsedNode, Platform, RawConfig, RawGroup, RawNode } from "./parsed.ts";
import { Secret } from "../../adapters/secret.ts";
import type { ParsedControl, SectionContext } from "../../adapters/power-backend.ts";
import { BACKENDS } from "../power/backends.ts";
import schema from "./schema.json" with { type: "json" };

/** A device call longer than this would hold plugpool's Lease long past a stop (see devices.timeouts). */
const MAX_DEVICE_TIMEOUT_MS = 30_000;

const TEMPLATE_KEYS = ["cpu", "memory", "pods"];
/** The template's keys as the schema defines them, allowed values included. */
const TEMPLATE_SCHEMA = schema.$defs.template.properties;

/** Reads values at paths, but only values the schema validated without error (else undefined). */
class Reader {
  readonly #root: unknown;
  readonly #dirty: readonly string[];

  constructor(root: unknown, schemaErrorPointers: readonly string[]) {
    this.#root = root;
    this.#dirty = schemaErrorPointers;
  }

  string(path: ConfigPath): string | undefined {
    const value = this.#clean(path);
    return typeof value === "string" ? value : undefined;
  }

  integer(path: ConfigPath): number | undefined {
    const value = this.#clean(path);
    return typeof value === "number" ? value : undefined;
  }

  /** A quantity written as a string or a YAML number. */
  quantity(path: ConfigPath): string | number | undefined {
    const value = this.#clean(path);
    return typeof value === "number" || typeof value === "string" ? value : undefined;
  }

  // The schema accepted everything at and below these paths, so what is there has the schema's shape.
  document(): RawConfig | undefined {
    return this.#clean([]) as RawConfig | undefined;
  }

  group(path: ConfigPath): RawGroup | undefined {
    return this.#clean(path) as RawGroup | undefined;
  }

  node(path: ConfigPath): RawNode | undefined {
    return this.#clean(path) as RawNode | undefined;
  }

  /** A backend's section, when the schema found nothing wrong in it. */
  section(path: ConfigPath): unknown {
    return this.#clean(path);
  }

  /** The entries of a list, whatever is wrong inside them (each entry is read through this reader). */
  list(path: ConfigPath): readonly unknown[] | undefined {
    const value = this.#at(path);
    return Array.isArray(value) && !this.#dirty.includes(pointer(path)) ? value : undefined;
  }

  keys(path: ConfigPath): readonly string[] {
    const value = this.#at(path);
    return typeof value === "object" && value !== null ? Object.keys(value) : [];
  }

  isList(path: ConfigPath): boolean {
    return Array.isArray(this.#at(path));
  }

  present(path: ConfigPath): boolean {
    return this.#at(path) !== undefined;
  }

  #at(path: ConfigPath): unknown {
    return path.reduce<unknown>((node, key) => childOf(node, key), this.#root);
  }

  #clean(path: ConfigPath): unknown {
    const at = pointer(path);
    return this.#dirty.some((p) => p === at || p.startsWith(`${at}/`)) ? undefined : this.#at(path);
  }
}

function pointer(path: ConfigPath): string {
  return path.map((p) => `/${String(p).replaceAll("~", "~0").replaceAll("/", "~1")}`).join("");
}

const MIN_NOT_READY_TIMEOUT_MS = 10_000;
const MIN_GRACE_MS = 1_000;

/** Every problem of the file the schema cannot see, and its values parsed: `parsed` only if every one parsed. */
export interface Checked {
  readonly issues: readonly ConfigIssue[];
  readonly parsed?: ParsedConfig;
}

/**
 * `schemaErrorPointers`: the instancePaths of ajv's errors (values at and below them are skipped: the schema has
 * reported them). `env`: the environment, where backends find the secrets all their controls share.
 */
export function checkConfig(root: unknown, schemaErrorPointers: readonly string[], env: Readonly<Record<string, string | undefined>>): Checked {
  const read = new Reader(root, schemaErrorPointers);
  const issues: ConfigIssue[] = [];
  const report = (path: ConfigPath, message: string) => issues.push({ path, message });
  /** The string at `path`, parsed; one that does not parse is reported with what the format expects. */
  const parse = <T>(path: ConfigPath, parser: (text: string) => T | undefined, expected: string): T | undefined => {
    const text = read.string(path);
    const value = text === undefined ? undefined : parser(text);
    if (text !== undefined && value === undefined) report(path, expected);
    return value;
  };
  const duration = (path: ConfigPath) => parse(path, parseDuration, PARSED_FORMATS.duration.expected);

  const listen = parse(["listen"], parseHostPort, PARSED_FORMATS["host-port"].expected);
  const opsListen = parse(["opsListen"], parseHostPort, PARSED_FORMATS["host-port"].expected);
  checkAddresses(read, listen, opsListen, report);
  const durations = checkDurations(read, duration, report);
  checkEfficientOrder(read, report);
  if (read.section(["leaderElection", "followAutoscaler"]) === true) {
    report(["leaderElection", "followAutoscaler"], "must be false or a mapping (namespace, name); leave it out to follow cluster-autoscaler's default Lease");
  }

  const groupIds = new Map<string, ConfigPath>();
  const nodeNames = new Map<string, ConfigPath>();
  const controls = new Map<string, ConfigPath>();
  const identities = new Map<string, ConfigPath>();
  const perBackend = new Map(BACKENDS.map((b) => [b.name, [] as { control: ParsedControl<unknown>; path: ConfigPath }[]]));
  const context = { report, env, secretFile: secretFileReader(report) };
  const groups = (read.list(["nodeGroups"]) ?? []).map((_, g): ParsedGroup | undefined => {
    const group = ["nodeGroups", g];
    const id = read.string([...group, "id"]);
    if (id !== undefined) {
      firstOrReport(groupIds, id, [...group, "id"], (first) => `"${id}" is also used at ${first}; group ids must be unique`, report);
    }
    checkSizes(read, group, report);
    const platform = checkTemplate(read, [...group, "template"], report);
    const nodes = (read.list([...group, "nodes"]) ?? []).map((__, n): ParsedNode | undefined => {
      const node = [...group, "nodes", n];
      const name = read.string([...node, "name"]);
      if (name !== undefined) {
        const what = (first: string) => `"${name}" is also listed at ${first}; node names must be unique across all groups`;
        firstOrReport(nodeNames, name, [...node, "name"], what, report);
      }
      const identity = read.string([...node, "deviceIdentity"]);
      if (identity !== undefined) {
        const what = (first: string) =>
          `is also pinned at ${first}; two machines cannot be powered by one device (give each device a name of its own, and pin that)`;
        firstOrReport(identities, identity, [...node, "deviceIdentity"], what, report);
      }
      const control = parseControl(read, node, context, report);
      if (control !== undefined) {
        const what = (first: string) =>
          `is the same power control as ${first} (${control.label}, on device ${control.device}); each machine needs its own`;
        firstOrReport(controls, control.key, [...node, control.section], what, report);
        perBackend.get(control.backend)?.push({ control, path: [...node, control.section] });
      }
      const raw = read.node(node);
      return raw === undefined || control === undefined ? undefined : { raw, control };
    });
    const raw = read.group(group);
    const parsedNodes = all(nodes);
    return raw === undefined || parsedNodes === undefined || platform === undefined ? undefined : { raw, platform, nodes: parsedNodes };
  });
  for (const backend of BACKENDS) backend.check?.(perBackend.get(backend.name) ?? [], context);
  const raw = read.document();
  const parsedGroups = all(groups);
  const complete = raw !== undefined && listen !== undefined && opsListen !== undefined && durations !== undefined && parsedGroups !== undefined;
  return { issues, ...(complete && { parsed: { raw, listen, opsListen, durations, groups: parsedGroups } }) };
}

/** The list if no entry is missing. */
function all<T>(entries: readonly (T | undefined)[]): readonly T[] | undefined {
  const present = entries.filter((entry) => entry !== undefined);
  return present.length === entries.length ? present : undefined;
}

/** Parses every duration and checks its limits; all of them, if every one parsed. */
function checkDurations(read: Reader, duration: (path: ConfigPath) => number | undefined, report: Report): Durations | undefined {
  const deviceTimeouts = checkDeviceTimeouts(read, duration, report);
  // Shorter than these, the power-off pod and the cut would come in one pass: no shutdown could finish between them.
  const notReadyTimeout = duration(["powerOff", "notReadyTimeout"]);
  if (notReadyTimeout !== undefined && notReadyTimeout < MIN_NOT_READY_TIMEOUT_MS) {
    report(["powerOff", "notReadyTimeout"], "must be at least 10s: the OS needs time to shut down before the node goes NotReady");
  }
  const grace = duration(["powerOff", "grace"]);
  if (grace !== undefined && grace < MIN_GRACE_MS) report(["powerOff", "grace"], "must be at least 1s");
  const standbyWindow = duration(["powerOff", "standbyWindow"]);
  const powerOnInterval = duration(["scaleUp", "powerOnInterval"]);
  if (powerOnInterval === 0) report(["scaleUp", "powerOnInterval"], "must be more than 0");
  const quarantineInitial = duration(["quarantine", "initial"]);
  const quarantineMax = duration(["quarantine", "max"]);
  if (quarantineInitial !== undefined && quarantineMax !== undefined && quarantineMax < quarantineInitial) {
    report(["quarantine", "max"], `must be at least quarantine.initial (${read.string(["quarantine", "initial"]) ?? ""})`);
  }
  if (
    deviceTimeouts === undefined || notReadyTimeout === undefined || grace === undefined || standbyWindow === undefined ||
    powerOnInterval === undefined || quarantineInitial === undefined || quarantineMax === undefined
  ) {
    return undefined;
  }
  return { deviceTimeouts, notReadyTimeout, grace, standbyWindow, powerOnInterval, quarantineInitial, quarantineMax };
}

/** devices.timeouts, and the deprecated plugs.timeout, as far as the file sets them; undefined when one is unusable. */
function checkDeviceTimeouts(read: Reader, duration: (path: ConfigPath) => number | undefined, report: Report): DeviceTimeouts | undefined {
  /** The timeout at `path`: undefined when not set, "unusable" when set but not usable (reported). */
  const timeoutAt = (path: ConfigPath): number | "unusable" | undefined => {
    if (read.string(path) === undefined) return undefined;
    const ms = duration(path);
    if (ms !== undefined && ms > 0 && ms <= MAX_DEVICE_TIMEOUT_MS) return ms;
    if (ms !== undefined) report(path, "must be more than 0 and at most 30s");
    return "unusable";
  };
  const set = BACKENDS.map((b) => [b.section, timeoutAt(["devices", "timeouts", b.section])] as const);
  const plugs = timeoutAt(["plugs", "timeout"]);
  if (plugs === "unusable" || set.some(([, ms]) => ms === "unusable")) return undefined;
  const bySection = Object.fromEntries(set.filter((entry): entry is readonly [string, number] => typeof entry[1] === "number"));
  return { bySection, ...(plugs !== undefined && { plugs }) };
}

type Report = (path: ConfigPath, what: string) => void;

/** Remembers the first path of each key; reports a later one, naming both paths. */
function firstOrReport(
  seen: Map<string, ConfigPath>,
  key: string,
  path: ConfigPath,
  what: (firstPath: string) => string,
  report: Report,
): void {
  const first = seen.get(key);
  if (first === undefined) seen.set(key, path);
  else report(path, what(formatPath(first)));
}

/** Without any idleWatts every machine ties and `efficient` would silently be config order. */
function checkEfficientOrder(read: Reader, report: Report): void {
  if (read.string(["scaleUp", "order"]) !== "efficient") return;
  const groups = read.list(["nodeGroups"]) ?? [];
  const any = groups.some(
    (_, g) =>
      read.present(["nodeGroups", g, "idleWatts"]) ||
      (read.list(["nodeGroups", g, "nodes"]) ?? []).some((__, n) => read.present(["nodeGroups", g, "nodes", n, "idleWatts"])),
  );
  if (groups.length > 0 && !any) {
    report(["scaleUp", "order"], "efficient orders machines by idleWatts, but no group or node sets idleWatts; set it, or use config or least-used");
  }
}

function checkAddresses(read: Reader, listen: HostPort | undefined, ops: HostPort | undefined, report: Report): void {
  if (listen !== undefined && !read.present(["tls"]) && !isLoopback(listen.host)) {
    report(
      ["listen"],
      `host ${listen.host} is not loopback; without tls, listen on 127.0.0.1, ::1 or localhost (cluster-autoscaler runs in the same pod)`,
    );
  }
  if (listen !== undefined && ops !== undefined && listen.port !== 0 && listen.port === ops.port) {
    const overlap = listen.host === ops.host || isWildcard(listen.host) || isWildcard(ops.host);
    if (overlap) report(["opsListen"], `port ${ops.port} is already used by listen; choose another port`);
  }
}

function checkSizes(read: Reader, group: ConfigPath, report: Report): void {
  const min = read.integer([...group, "minSize"]);
  const max = read.integer([...group, "maxSize"]);
  const nodes = read.list([...group, "nodes"]);
  if (min !== undefined && max !== undefined && min > max) {
    report([...group, "minSize"], `${min} is more than maxSize ${max}`);
  }
  if (max !== undefined && nodes !== undefined && max > nodes.length) {
    report([...group, "maxSize"], `${max} is more than the ${nodes.length} ${nodes.length === 1 ? "node" : "nodes"} listed`);
  }
}

/** The architecture and OS a template claims, from template.arch and .os or their labels; undefined after a problem. */
function checkTemplate(read: Reader, template: ConfigPath, report: Report): Platform | undefined {
  // Extra resources written as a list are reported by the schema alone (not as quantities of a mapping).
  const resourcesMapping = !read.isList([...template, "resources"]);
  /** The quantity at `path`, parsed; one written as a string that does not parse is reported (YAML numbers always have its syntax). */
  const parse = (path: ConfigPath, inMapping = true) => {
    const written = read.quantity(path);
    const quantity = written === undefined ? undefined : parseQuantity(String(written));
    if (inMapping && typeof written === "string" && quantity === undefined) report(path, PARSED_FORMATS.quantity.expected);
    return { text: String(written), quantity };
  };
  const check = (path: ConfigPath, rule: "positive" | "whole" | "not-negative", inMapping = true) => {
    const { text, quantity } = parse(path, inMapping);
    if (quantity === undefined) return;
    if (rule === "not-negative" && quantity.sign < 0) report(path, `must not be negative (found ${text})`);
    else if (rule !== "not-negative" && quantity.sign <= 0) report(path, `must be more than 0 (found ${text})`);
    else if (rule === "whole" && !quantity.isInteger) report(path, `must be a whole number such as "110" (found ${text})`);
  };
  check([...template, "cpu"], "positive");
  check([...template, "memory"], "positive");
  check([...template, "pods"], "whole");
  const platform = checkPlatform(read, template, report);
  for (const name of read.keys([...template, "resources"])) {
    if (TEMPLATE_KEYS.includes(name)) {
      parse([...template, "resources", name], resourcesMapping);
      report([...template, "resources", name], `set ${name} as template.${name}, not among the extra resources`);
    } else {
      check([...template, "resources", name], "not-negative", resourcesMapping);
    }
  }
  return platform;
}

const DEFAULT_PLATFORM: Platform = { arch: "amd64", os: "linux" };

/**
 * A user may write the arch and os as plugpool's keys or as the labels the kubelet sets; either is honoured.
 * Only two spellings that disagree, or a label value plugpool does not support, are refused: a silent pick
 * would promise cluster-autoscaler machines that do not exist.
 */
function checkPlatform(read: Reader, template: ConfigPath, report: Report): Platform | undefined {
  const pick = (field: keyof Platform, key: string): string | undefined => {
    const labelPath = [...template, "labels", key];
    const label = read.string(labelPath);
    const written = read.string([...template, field]);
    const supported: readonly string[] = TEMPLATE_SCHEMA[field].enum;
    if (label !== undefined && !supported.includes(label)) {
      const expected = field === "os"
        ? "must be linux: plugpool drives only Linux machines (it shuts them down with systemctl)"
        : `must be an architecture as the kubelet names it: one of ${supported.join(", ")}`;
      report(labelPath, `is ${label}; ${expected}`);
      return undefined;
    }
    if (label !== undefined && written !== undefined && label !== written) {
      report(labelPath, `is ${label} but template.${field} is ${written}; write one of them, or make both say the same`);
      return undefined;
    }
    // An invalid template.arch or .os was reported by the schema, and reads as not written.
    if (written === undefined && read.present([...template, field])) return undefined;
    return written ?? label ?? DEFAULT_PLATFORM[field];
  };
  const arch = pick("arch", "kubernetes.io/arch");
  const os = pick("os", "kubernetes.io/os");
  return arch === undefined || os === undefined ? undefined : { arch, os };
}

/**
 * The node's power control, parsed by its backend. A node names exactly one backend's section; one the schema
 * found fault with is left to the schema's report.
 */
function parseControl(read: Reader, node: ConfigPath, context: Omit<SectionContext, "path">, report: Report): NodeControl | undefined {
  const named = BACKENDS.filter((b) => read.present([...node, b.section]));
  if (named.length !== 1) {
    const sections = BACKENDS.map((b) => b.section).join(", ");
    const found = named.map((b) => b.section).join(" and ");
    report(node, named.length === 0 ? `needs a power control: set one of ${sections}` : `sets ${found}; a machine has one power control`);
    return undefined;
  }
  const [backend] = named;
  if (backend === undefined) return undefined;
  const path = [...node, backend.section];
  const section = read.section(path);
  const parsed = section === undefined ? undefined : backend.parse(section, { ...context, path });
  return parsed === undefined ? undefined : { ...parsed, backend: backend.name, section: backend.section };
}

/** Reads each file a section names once; one that cannot be read is reported where it was first named, by key. */
function secretFileReader(report: Report): SectionContext["secretFile"] {
  const files = new Map<string, Secret | undefined>();
  return (file, at) => {
    if (!files.has(file)) {
      try {
        // A Secret's files usually end in a newline that is no part of the value.
        files.set(file, new Secret(readSmallFile(file).replace(/\r?\n$/u, "")));
      } catch (error) {
        files.set(file, undefined);
        // The path is not repeated: a secret is easily written where its file's path belongs.
        report(at, `must be the path of a readable file (${whyUnreadable(error)})`);
      }
    }
    return files.get(file);
  };
}

/** The largest secret file read: a password or a token is far smaller. */
const MAX_SECRET_FILE_BYTES = 64 * 1024;

/**
 * A secret file's text. Only a regular file of a secret's size is read: a FIFO or a terminal would block
 * start-up until something wrote to it, and a device such as /dev/zero would fill the memory.
 */
function readSmallFile(file: string): string {
  const stat = statSync(file);
  if (!stat.isFile()) throw Object.assign(new Error("not a regular file"), { code: "ENOTREGULAR" });
  if (stat.size > MAX_SECRET_FILE_BYTES) throw Object.assign(new Error("too large"), { code: "ETOOLARGE" });
  return readFileSync(file, "utf8");
}

/** Why a file could not be read, in a few words (never its content). */
export function whyUnreadable(error: unknown): string {
  const code = (error as { code?: unknown }).code;
  if (code === "ENOTREGULAR") return "not a regular file";
  if (code === "ETOOLARGE") return `larger than ${MAX_SECRET_FILE_BYTES / 1024} KiB`;
  if (code === "ENOENT") return "no such file";
  if (code === "EACCES") return "permission denied";
  if (code === "EISDIR") return "is a directory";
  return String(code ?? error);
}
