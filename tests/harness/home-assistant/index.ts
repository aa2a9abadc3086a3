// The real Home Assistant for the tests, installed by tests/harness/home-assistant/install.sh: started on a
// free loopback port with a generated configuration that loads only what the REST API and the test entities
// need, already onboarded, with long-lived access tokens made the way Home Assistant makes them.
import { createHash, createHmac, randomBytes, randomUUID } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { createOwnedTempDir, onAbruptExit, startProcess } from "../control-plane/process.ts";
import { freePorts, waitUntilReady } from "../control-plane/readiness.ts";
import type { HomeAssistantBackstage, HomeAssistantSetup } from "./backstage.ts";

export type { HomeAssistantBackstage, HomeAssistantSetup } from "./backstage.ts";

/**
 * The venv install.sh made, keyed as install.sh does it (the first 16 hex digits of sha256(requirements.txt)),
 * or undefined when it is not there.
 */
export function homeAssistantVenv(): string | undefined {
  const key = createHash("sha256").update(readFileSync(join(import.meta.dirname, "requirements.txt"))).digest("hex").slice(0, 16);
  // As in install.sh and .ci/node-env.sh, an empty PLUGPOOL_CACHE counts as unset.
  const configured = process.env.PLUGPOOL_CACHE;
  const cache = configured !== undefined && configured !== "" ? configured : join(homedir(), ".cache", "plugpool");
  const venv = join(cache, "home-assistant", key);
  return existsSync(join(venv, "bin", "python")) ? venv : undefined;
}

/** Why the real Home Assistant cannot run here, for a test's skip message; undefined when it can. */
export function homeAssistantMissing(): string | undefined {
  return homeAssistantVenv() === undefined
    ? "Home Assistant is not installed: run tests/harness/home-assistant/install.sh (scripts/dev.sh setup does)"
    : undefined;
}

export interface RunningHomeAssistant extends HomeAssistantBackstage {
  /** Milliseconds from spawning Home Assistant to its core reporting RUNNING. */
  readonly startMs: number;
  readonly logPath: string;
}

/**
 * Starts Home Assistant with, for each switch name `n`: `input_boolean.n` (the stand-in relay, off) and
 * `switch.n`, a template switch over it; for each sensor `s`: `input_number.s` and `sensor.s` (a template
 * power sensor over it), both in W. Resolves once its core is RUNNING.
 */
export async function startHomeAssistant(setup: HomeAssistantSetup): Promise<RunningHomeAssistant> {
  const venv = homeAssistantVenv();
  if (venv === undefined) throw new Error(homeAssistantMissing());
  const dir = createOwnedTempDir("plugpool-home-assistant-");
  const unregister = onAbruptExit(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const { http } = await freePorts(["http"]);
  const url = `http://127.0.0.1:${http}`;
  const config = join(dir, "config");
  writeConfiguration(config, http, setup);
  // plugpool's token, and another user's for the changes made behind its back.
  const users = [longLivedToken("plugpool"), longLivedToken("someone else")];
  writeAuth(config, users.map((u) => u.stored));
  const [token, ownerToken] = users.map((u) => u.token) as [string, string];
  writeOnboardingDone(config);
  writeLoopbackOnly(config);

  const started = Date.now();
  const logPath = join(dir, "home-assistant.out");
  // --skip-pip: every package is installed already, and nothing may be fetched while a test runs.
  const child = startProcess("home-assistant", join(venv, "bin", "python"), [
    "-m", "homeassistant", "--config", config, "--skip-pip", "--log-no-color",
  ], logPath);
  const stop = async (): Promise<void> => {
    await child.stop(10_000);
    rmSync(dir, { recursive: true, force: true });
    unregister();
  };
  const owner = (method: string, path: string, body?: unknown): Promise<Response> => fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${ownerToken}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  const call = async (domain: string, service: string, data: Record<string, unknown>): Promise<void> => {
    const answer = await owner("POST", `/api/services/${domain}/${service}`, data);
    if (!answer.ok) throw new Error(`${domain}.${service} ${JSON.stringify(data)}: ${answer.status} ${await answer.text()}`);
  };
  try {
    await waitUntilReady(child, "RUNNING core", async () => {
      try {
        const answer = await owner("GET", "/api/config");
        return answer.ok && ((await answer.json()) as { state?: string }).state === "RUNNING";
      } catch {
        return false;
      }
    }, 120_000);
  } catch (error) {
    await stop();
    throw error;
  }
  const startMs = Date.now() - started;
  return {
    url,
    token,
    startMs,
    logPath: join(config, "home-assistant.log"),
    setSwitch: (name, on) => call("input_boolean", on ? "turn_on" : "turn_off", { entity_id: `input_boolean.${name}` }),
    setWatts: (name, watts) => call("input_number", "set_value", { entity_id: `input_number.${name}`, value: watts }),
    setAvailable: (name, available) =>
      call("input_boolean", available ? "turn_on" : "turn_off", { entity_id: `input_boolean.${name}_reachable` }),
    stop,
  };
}

function writeConfiguration(config: string, port: number, setup: HomeAssistantSetup): void {
  const sensors = Object.entries(setup.sensors ?? {});
  const assumed = setup.assumed ?? [];
  const reachable = [...setup.switches, ...assumed, ...sensors.map(([name]) => name)];
  const flag = (name: string): string => `input_boolean.${name}_reachable`;
  const configuration = {
    // Everything set, so that nothing is looked up (location, units, currency) from the internet.
    homeassistant: {
      name: "plugpool test", latitude: 52.52, longitude: 13.4, elevation: 34, unit_system: "metric",
      time_zone: "UTC", country: "DE", currency: "EUR", language: "en",
    },
    http: { server_host: "127.0.0.1", server_port: port },
    api: {},
    logger: { default: "warning" },
    input_boolean: Object.fromEntries([
      ...[...setup.switches, ...assumed].map((name): [string, unknown] => [name, { name, initial: false }]),
      ...reachable.map((name): [string, unknown] => [`${name}_reachable`, { name: `${name} reachable`, initial: true }]),
    ]),
    input_number: Object.fromEntries(sensors.map(([name, watts]) => [name, {
      name, min: 0, max: 100_000, step: 0.1, mode: "box", unit_of_measurement: "W", initial: watts,
    }])),
    template: [{
      switch: [...setup.switches, ...assumed].map((name) => ({
        name,
        unique_id: `switch-${name}`,
        // Without a state template a template switch is optimistic: its state is assumed.
        ...(assumed.includes(name) ? {} : { state: `{{ is_state('input_boolean.${name}', 'on') }}` }),
        availability: `{{ is_state('${flag(name)}', 'on') }}`,
        turn_on: [{ action: "input_boolean.turn_on", target: { entity_id: `input_boolean.${name}` } }],
        turn_off: [{ action: "input_boolean.turn_off", target: { entity_id: `input_boolean.${name}` } }],
      })),
      sensor: sensors.map(([name]) => ({
        name,
        unique_id: `sensor-${name}`,
        unit_of_measurement: "W",
        device_class: "power",
        state_class: "measurement",
        state: `{{ states('input_number.${name}') }}`,
        availability: `{{ is_state('${flag(name)}', 'on') }}`,
      })),
    }],
  };
  mkdirSync(join(config, ".storage"), { recursive: true });
  writeFileSync(join(config, "configuration.yaml"), stringify(configuration));
}

interface StoredToken {
  readonly id: string;
  readonly userId: string;
  readonly name: string;
  readonly jwtKey: string;
  readonly token: string;
}

const tenYears = 3650 * 86_400;

/**
 * A user of `name` and a long-lived access token for it, as the profile page's "Create token" makes them: a
 * refresh token of type long_lived_access_token whose access token is a JWT (HS256, keyed by the refresh
 * token's jwt_key, issuer its id) that expires in ten years
 * (https://github.com/home-assistant/core/blob/2025.4.4/homeassistant/auth/__init__.py,
 * async_create_access_token; the stored fields are those of auth_store.py's _data_to_save).
 */
function longLivedToken(name: string): { readonly stored: StoredToken; readonly token: string } {
  const stored: StoredToken = {
    id: randomUUID().replaceAll("-", ""),
    userId: randomUUID().replaceAll("-", ""),
    name,
    jwtKey: randomBytes(64).toString("hex"),
    token: randomBytes(64).toString("hex"),
  };
  const now = Math.floor(Date.now() / 1000);
  const segment = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString("base64url");
  const unsigned = `${segment({ alg: "HS256", typ: "JWT" })}.${segment({ iss: stored.id, iat: now, exp: now + tenYears })}`;
  return { stored, token: `${unsigned}.${createHmac("sha256", stored.jwtKey).update(unsigned).digest("base64url")}` };
}

/** Writes .storage/auth: one administrator for each token, the first one the owner. */
function writeAuth(config: string, tokens: readonly StoredToken[]): void {
  const created = new Date().toISOString();
  writeStorage(config, "auth", 1, 1, {
    users: tokens.map((t, i) => ({
      id: t.userId, group_ids: ["system-admin"], is_owner: i === 0, is_active: true, name: t.name,
      system_generated: false, local_only: false,
    })),
    groups: [
      { id: "system-admin", name: "Administrators" },
      { id: "system-users", name: "Users" },
      { id: "system-read-only", name: "Read Only" },
    ],
    credentials: [],
    refresh_tokens: tokens.map((t) => ({
      id: t.id, user_id: t.userId, client_id: null, client_name: t.name, client_icon: null,
      token_type: "long_lived_access_token", created_at: created, access_token_expiration: tenYears,
      token: t.token, jwt_key: t.jwtKey, last_used_at: null, last_used_ip: null, expire_at: null,
      credential_id: null, version: null,
    })),
  });
}

// Onboarding done: its pages stay closed, and no onboarding step waits for a person
// (https://github.com/home-assistant/core/blob/2025.4.4/homeassistant/components/onboarding/__init__.py).
function writeOnboardingDone(config: string): void {
  writeStorage(config, "onboarding", 4, 1, { done: ["user", "core_config", "analytics", "integration"] });
}

// The network adapters Home Assistant may use: loopback alone (Settings → System → Network), so that the mDNS
// resolver its HTTP client starts binds to no other interface
// (https://github.com/home-assistant/core/blob/2025.4.4/homeassistant/components/zeroconf/__init__.py).
function writeLoopbackOnly(config: string): void {
  writeStorage(config, "core.network", 1, 1, { configured_adapters: ["lo"] });
}

function writeStorage(config: string, key: string, version: number, minorVersion: number, data: unknown): void {
  writeFileSync(join(config, ".storage", key), JSON.stringify({ version, minor_version: minorVersion, key, data }, null, 2), { mode: 0o600 });
}
