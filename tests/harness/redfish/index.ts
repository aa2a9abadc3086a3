/**
 * A real Redfish BMC for tests: sushy-tools' sushy-emulator (installed by tests/harness/redfish/install.sh) with
 * its fake driver, on a free loopback port, over https with a throwaway CA, behind Basic auth, with N fake
 * systems whose ids are known.
 *
 * What the emulator does (sushy-tools 2.2.0, https://github.com/openstack/sushy-tools/tree/2.2.0):
 * - `POST /redfish/v1/Systems/<id>/Actions/ComputerSystem.Reset` answers 204 at once; the fake driver applies
 *   On/ForceOff/GracefulShutdown at the first read after its apply time, the current whole second plus 1 to 11
 *   (random): so anywhere from just after the answer to 11 s later. Until then PowerState keeps its old value
 *   (no PoweringOn/PoweringOff). A Reset towards the state the system already has records nothing. An unknown
 *   ResetType answers 501.
 * - Only `/`, `/redfish` and `/redfish/v1` are served without credentials; anything else without them, or
 *   with wrong ones, answers 401 with `WWW-Authenticate: Basic`. There is no SessionService (404 with good
 *   credentials): session login cannot be tried against it.
 * - An unknown system answers 404; a system addressed by its Name instead of its Id answers 307 to its Id.
 * - Every answer closes the connection (Werkzeug's development server).
 */
import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { get as httpsGet } from "node:https";
import { homedir } from "node:os";
import { join } from "node:path";
import { promisify, stripVTControlCharacters } from "node:util";
import { createOwnedTempDir, onAbruptExit, startProcess, type ManagedProcess } from "../control-plane/process.ts";
import { answersOk, freePorts, waitUntilReady } from "../control-plane/readiness.ts";
import { createPki, type Pki } from "../test-pki.ts";

const run = promisify(execFile);
const here = import.meta.dirname;

/** One fake system: its Id (the `<id>` of /redfish/v1/Systems/<id>), its Name, and its power at start. */
export interface FakeSystem {
  readonly id: string;
  readonly name?: string;
  readonly power?: "On" | "Off";
}

export interface RedfishOptions {
  /** A number N (ids `system-1` … `system-N`, all off) or the systems themselves. Default 1. */
  readonly systems?: number | readonly FakeSystem[];
}

/** A request the emulator logged. */
export interface RequestRecord {
  readonly method: string;
  readonly path: string;
  readonly status: number;
}

/** What a Reset left for the fake driver to apply later. */
export interface PendingPower {
  readonly state: string;
  /** Epoch seconds. */
  readonly applyAt: number;
}

export interface RunningRedfish {
  /** https://127.0.0.1:<port> */
  readonly url: string;
  /** The CA file that issued the emulator's certificate. */
  readonly caFile: string;
  /** A CA file that issued nothing the emulator shows: trusting only it must refuse the emulator. */
  readonly strangerCaFile: string;
  readonly username: string;
  readonly password: string;
  /** The systems' ids, in the order given. */
  readonly systems: readonly string[];
  readonly process: ManagedProcess;
  /** PowerState as the emulator's store has it now (null: none), without a request to the emulator. */
  powerState(id: string): Promise<string | null>;
  /** What a Reset left pending, if anything. */
  pending(id: string): Promise<PendingPower | undefined>;
  /**
   * Sets PowerState at once, dropping anything pending, as a person at the machine or another client would:
   * "On", "Off", any other string the emulator then shows as it is ("PoweringOff"), or null for none.
   */
  setPower(id: string, state: string | null): Promise<void>;
  /** Makes a pending Reset apply at the emulator's next read of the system, instead of up to 11 s after it. */
  settle(id: string): Promise<void>;
  /** Every request the emulator has answered since it was ready (the start's own left out), in order. */
  requests(): RequestRecord[];
  stop(): Promise<void>;
}

/** The venv install.sh made, keyed as install.sh keys it; throws, saying how to make it, when it is not there. */
export function emulatorPython(): string {
  const key = createHash("sha256").update(readFileSync(join(here, "requirements.txt"))).digest("hex").slice(0, 16);
  // As in install.sh: an empty PLUGPOOL_CACHE counts as unset.
  const configured = process.env.PLUGPOOL_CACHE;
  const cache = configured !== undefined && configured !== "" ? configured : join(homedir(), ".cache", "plugpool");
  const python = join(cache, "redfish", key, "venv", "bin", "python");
  if (!existsSync(python)) {
    throw new Error(`sushy-emulator not found at ${python}: run tests/harness/redfish/install.sh (scripts/dev.sh setup does)`);
  }
  return python;
}

function systemsOf(option: RedfishOptions["systems"]): readonly FakeSystem[] {
  if (typeof option === "number" || option === undefined) {
    return Array.from({ length: option ?? 1 }, (_, i) => ({ id: `system-${i + 1}` }));
  }
  return option;
}

/** Starts the emulator; resolves once it answers over TLS with the CA it was given. */
export async function startRedfish(options: RedfishOptions = {}): Promise<RunningRedfish> {
  const python = emulatorPython();
  const systems = systemsOf(options.systems);
  const dir = createOwnedTempDir("plugpool-redfish-");
  const pki = createPki();
  const removeDirs = (): void => {
    rmSync(dir, { recursive: true, force: true });
    rmSync(pki.dir, { recursive: true, force: true });
  };
  const unregister = onAbruptExit(removeDirs);
  const cleanUp = (): void => {
    removeDirs();
    unregister();
  };
  const username = "plugpool";
  const password = randomBytes(12).toString("hex");
  const stateDir = join(dir, "state");
  const logPath = join(dir, "emulator.log");
  let port: number;
  let emulator: ManagedProcess;
  try {
    ({ port } = await freePorts(["port"]));
    emulator = await launch(python, { dir, port, username, password, stateDir, logPath, systems, pki });
  } catch (error) {
    cleanUp();
    throw error;
  }
  const url = `https://127.0.0.1:${port}`;

  const readinessRequests = requestsIn(readFileSync(logPath, "utf8")).length;
  const state = async (command: string, id: string, ...rest: string[]): Promise<StoredSystem> => {
    try {
      return JSON.parse(await pythonOutput(python, [join(here, "fake-state.py"), stateDir, command, id, ...rest])) as StoredSystem;
    } catch (error) {
      if ((error as { code?: unknown }).code === 3) throw new Error(`no fake system ${JSON.stringify(id)}`, { cause: error });
      throw error;
    }
  };
  return {
    url,
    caFile: pki.ca,
    strangerCaFile: pki.strangerCa,
    username,
    password,
    systems: systems.map((s) => s.id),
    process: emulator,
    powerState: async (id) => (await state("show", id)).power_state,
    pending: async (id) => {
      const pending = (await state("show", id)).pending_power;
      return pending === null ? undefined : { state: pending.power_state, applyAt: pending.apply_time };
    },
    setPower: async (id, power) => { await state("set", id, power ?? "null"); },
    settle: async (id) => { await state("settle", id); },
    requests: () => requestsIn(readFileSync(logPath, "utf8")).slice(readinessRequests),
    stop: async () => {
      await emulator.stop();
      cleanUp();
    },
  };
}

interface LaunchSettings {
  readonly dir: string;
  readonly port: number;
  readonly username: string;
  readonly password: string;
  readonly stateDir: string;
  readonly logPath: string;
  readonly systems: readonly FakeSystem[];
  readonly pki: Pki;
}

/** Writes the emulator's config and auth file into `dir`, starts it and waits until it serves its systems. */
async function launch(python: string, settings: LaunchSettings): Promise<ManagedProcess> {
  const { dir, port, username, password, stateDir, logPath, systems, pki } = settings;
  // Only bcrypt entries are accepted (auth_basic.py); the lowest cost keeps each request's check quick.
  const hash = await pythonOutput(python, ["-c", "import bcrypt, sys; print(bcrypt.hashpw(sys.argv[1].encode(), bcrypt.gensalt(4)).decode())", password]);
  writeFileSync(join(dir, "htpasswd"), `${username}:${hash}\n`);
  const fakeSystems = systems.map((s) => ({
    uuid: s.id,
    name: s.name ?? `${s.id}-name`,
    power_state: s.power ?? "Off",
    external_notifier: false,
    nics: [],
  }));
  // The config file is Python (Flask's from_pyfile); JSON is read by it rather than written as Python.
  const config = [
    "import json",
    "SUSHY_EMULATOR_FAKE_DRIVER = True",
    `SUSHY_EMULATOR_LISTEN_IP = "127.0.0.1"`,
    `SUSHY_EMULATOR_LISTEN_PORT = ${port}`,
    `SUSHY_EMULATOR_AUTH_FILE = json.loads(${pyString(JSON.stringify(join(dir, "htpasswd")))})`,
    // The store defaults to one folder in /tmp shared by every emulator on the machine.
    `SUSHY_EMULATOR_STATE_DIR = json.loads(${pyString(JSON.stringify(stateDir))})`,
    `SUSHY_EMULATOR_FAKE_SYSTEMS = json.loads(${pyString(JSON.stringify(fakeSystems))})`,
    `SUSHY_EMULATOR_SSL_CERT = json.loads(${pyString(JSON.stringify(pki.serverCert))})`,
    `SUSHY_EMULATOR_SSL_KEY = json.loads(${pyString(JSON.stringify(pki.serverKey))})`,
  ].join("\n");
  writeFileSync(join(dir, "emulator.py"), `${config}\n`);

  const child = startProcess("sushy-emulator", python, ["-m", "sushy_tools.emulator.main", "--config", join(dir, "emulator.py")], logPath);
  try {
    const ca = readFileSync(pki.ca, "utf8");
    const url = `https://127.0.0.1:${port}`;
    await waitUntilReady(child, "service root", () => answersOk(`${url}/redfish/v1/`, ca), 60_000);
    // The fake driver puts its systems into the store at the first request that needs them.
    const status = await getStatus(`${url}/redfish/v1/Systems`, ca, `Basic ${Buffer.from(`${username}:${password}`).toString("base64")}`);
    if (status !== 200) throw new Error(`sushy-emulator answered ${status} to the systems' collection; log at ${logPath}:\n${child.logTail()}`);
  } catch (error) {
    await child.stop();
    throw error;
  }
  return child;
}

function getStatus(url: string, ca: string, authorization: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = httpsGet(url, { ca, headers: { authorization }, timeout: 10_000 }, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    request.once("timeout", () => request.destroy(new Error(`no answer from ${url} within 10 s`)));
    request.once("error", reject);
  });
}

/** What fake-state.py prints of a system. */
interface StoredSystem {
  readonly power_state: string | null;
  readonly pending_power: { readonly power_state: string; readonly apply_time: number } | null;
}

async function pythonOutput(python: string, args: readonly string[]): Promise<string> {
  const { stdout } = await run(python, args, { timeout: 30_000 });
  return stdout.trim();
}

/** A Python string literal holding `text`. */
function pyString(text: string): string {
  return `'${text.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;
}

// Werkzeug's access log: `127.0.0.1 - - [01/Dec/2026 07:05:06] "GET /redfish/v1/ HTTP/1.1" 200 -`, the request
// coloured with ANSI escapes when the status is not 200.
const ACCESS_LINE = /^\S+ - - \[[^\]]*\] "([A-Z]+) (\S+) HTTP\/[\d.]+" (\d{3}) /u;

function requestsIn(log: string): RequestRecord[] {
  const records: RequestRecord[] = [];
  for (const line of log.split("\n")) {
    const match = ACCESS_LINE.exec(stripVTControlCharacters(line));
    if (match) records.push({ method: match[1] ?? "", path: match[2] ?? "", status: Number(match[3]) });
  }
  return records;
}
